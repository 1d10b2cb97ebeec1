"""The agent policy: a causal language model directory (tokenizer, model, chat layout),
behaviour cloning, and batched multi-turn rollouts. Torch code, no Django."""
