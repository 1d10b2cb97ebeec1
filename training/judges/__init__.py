"""Judges, the side that calls a model: a judge's verdicts on comparisons, its run, its pages.

- `prompt.py`, `verdicts.py`: the messages and the JSON Schema of a verdict, and the
  model's answer read back as a judgement body (plain Python, no Django);
- `chat.py`, `addresses.py`: the client of an OpenAI-compatible endpoint, with retries, rate
  and cost limits, vetted addresses, and every HTTP attempt recorded for the audit log;
- `services.py`: creating, editing and running judges (reward model, rubric, chat);
- `run_kind.py`: the `judge` run kind; `pages.py` and `api.py`: the judges' pages and API.

The annotation side (votes stored and shown, agreement with people, the quality panels,
routing by judges) is annotate/judges/; the models are annotate's. docs/judges.md tells the
whole feature.
"""
