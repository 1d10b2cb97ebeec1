"""rewardmodel: built in its own issue; the app exists so the layout is complete."""
