"""Preference dataset snapshots: their pages, forms and API (the logic is in annotate/services/datasets.py)."""
