"""Contracts every app shares, in plain Python with no Django (and importing nothing of the apps):
the strict JSON reader (`core.json_input`). The parsers, serving, the judge client, and the
trajectory and trace formats read JSON through it, so ML code that uses them runs without
Django (issue 46)."""
