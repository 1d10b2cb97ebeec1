"""Corrections over REST (api.py); the services are annotate/services/corrections.py."""
