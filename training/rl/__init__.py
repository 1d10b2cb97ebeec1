"""Reinforcement learning of the policy against a scorer (a reward model or the rubric): PPO."""
