"""Config help lives in the dataclasses' field metadata (as TRL's configs do), and the docs'
option tables are generated from it (issue 30)."""

import dataclasses

from django.core.management import call_command

from training.loop.config import PipelineConfig
from webapp.runs.kinds import all_kinds


def test_every_option_of_every_run_kind_and_of_the_loop_says_what_it_does():
    missing = [
        f"{cls.__name__}.{f.name}"
        for cls in [k.config_class for k in all_kinds()] + [PipelineConfig]
        for f in dataclasses.fields(cls)
        if not f.metadata.get("help")
    ]
    assert missing == []


def test_the_generated_docs_option_tables_and_model_table_are_the_codes():
    call_command("generate_docs", "--check")  # raises CommandError when config-options.md or data-model.md is stale


def test_every_default_config_is_strict_json_as_a_run_stores_it():
    # A default of inf or nan is refused by PostgreSQL's JSON (a run's config is stored as one):
    # the launch then answered 500 (expert iteration's first min_score, -inf).
    import json

    for kind in all_kinds():
        json.dumps(dataclasses.asdict(kind.config_class()), allow_nan=False)
    json.dumps(dataclasses.asdict(PipelineConfig()), allow_nan=False)
