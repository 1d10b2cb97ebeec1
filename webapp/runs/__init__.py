"""Runs: launch, execute, cancel and resume training jobs of any registered kind; their pages and API."""
