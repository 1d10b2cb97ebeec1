"""Iterated rounds of the loop (rounds.py), the blind audit of what each round's reward model
scores highest (audit.py), and the per-round figures the dashboard draws (report.py)."""
