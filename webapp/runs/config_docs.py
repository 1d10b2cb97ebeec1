"""The option tables of docs/config-options.md, generated from the config dataclasses' field
metadata (`metadata["help"]`), so the docs list exactly what the code takes:

    python manage.py config_docs          # write docs/config-options.md
    python manage.py config_docs --check  # exit 1 when the file is out of date (the suite checks it)
"""
from __future__ import annotations

import dataclasses
from pathlib import Path

from django.conf import settings

from webapp.runs.kinds import all_kinds, field_help

DOCS_FILE = Path(settings.BASE_DIR) / "docs" / "config-options.md"
APPS = ("webapp", "annotate", "rewardmodel", "training")
HEADER = """# Configuration options

Generated from the config dataclasses by `python manage.py config_docs`; do not edit by hand
(the test suite fails when this file and the code disagree). Every run kind's config is what
`POST /api/v1/runs/ {"kind": ..., "config": {...}}` and the launch forms take: an option left
out takes its default, an unknown one is refused with its name.
"""


def _default(field: dataclasses.Field) -> str:
    if field.default is not dataclasses.MISSING:
        value = field.default
    elif field.default_factory is not dataclasses.MISSING:
        value = field.default_factory()
    else:
        return "(required)"
    text = repr(value) if not isinstance(value, str) else (f'"{value}"' if value else '""')
    return text.replace("|", "\\|")


def _type(field: dataclasses.Field) -> str:
    kind = field.type if isinstance(field.type, str) else getattr(field.type, "__name__", str(field.type))
    return kind.replace("|", "or")


def options_table(config_class: type) -> str:
    helps = field_help(config_class)
    rows = ["| option | type | default | what it does |", "|---|---|---|---|"]
    for field in dataclasses.fields(config_class):
        text = helps.get(field.name, "").replace("|", "\\|").replace("\n", " ")
        rows.append(f"| `{field.name}` | {_type(field)} | `{_default(field)}` | {text} |")
    return "\n".join(rows)


def config_docs() -> str:
    from training.loop.config import PipelineConfig

    parts = [HEADER]
    for kind in sorted(all_kinds(), key=lambda k: k.name):
        if kind.config_class.__module__.split(".")[0] not in APPS:
            continue  # a kind a test registered
        parts.append(f"## `{kind.name}`: {kind.label}\n\n{kind.description}\n\n{options_table(kind.config_class)}\n")
    parts.append("## `run_pipeline` (the loop)\n\nThe settings of `python manage.py run_pipeline` and of every round "
                 "of a loop (flags spell them with dashes; docs/loop.md).\n\n" + options_table(PipelineConfig) + "\n")
    return "\n".join(parts)
