"""Tasks, trajectories, campaigns, comparisons, assignments and judgements."""
