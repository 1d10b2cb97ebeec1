"""Judges: chat models behind an OpenAI-compatible endpoint that vote on comparisons.

Plain Python, no Django: `prompt` builds the messages and the JSON Schema of a verdict and
reads the model's answer back as a judgement body; `chat` sends the messages, with retries,
rate and cost limits, and records every HTTP attempt for the audit log.
"""
