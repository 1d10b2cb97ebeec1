"""Evaluation: play systems on held-out tasks, figures with intervals, before/after dashboards."""
