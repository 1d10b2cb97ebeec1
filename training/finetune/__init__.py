"""Fine-tuning a policy straight from people's data, beside the reward model and RL: supervised
fine-tuning on accepted corrections (TRL's SFTTrainer) and DPO on corrections and preference
pairs (TRL's DPOTrainer). config.py holds the settings, train.py the training (no Django),
services.py the Django glue (snapshot rows in, a registered policy out)."""
