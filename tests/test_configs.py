"""A config declared once (core/configs.py): the command-line options, the forms' fields and the
docs' tables are made from its fields, and text is read as the API reads it."""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass, field

import pytest
from django.core.management import call_command, load_command_class

from core.configs import add_config_arguments, config_from_arguments, config_from_input, field_help, flag
from training.loop.config import PipelineConfig
from training.rl.config import ExpertIterationConfig, RLConfig


@dataclass
class Example:
    steps: int = field(default=10, metadata={"help": "optimizer steps"})
    rate: float = field(default=0.5, metadata={"help": "a rate of 50%"})
    name: str = field(default="", metadata={"help": "what it is called"})
    greedy: bool = field(default=True, metadata={"help": "play greedy"})
    overrides: dict = field(default_factory=dict, metadata={"help": "run overrides"})

    def validate(self) -> list[str]:
        return ["steps: at least 1."] if self.steps < 1 else []


def parse(*argv: str, **options) -> Example:
    parser = argparse.ArgumentParser()
    add_config_arguments(parser, Example, **options)
    return config_from_arguments(Example, parser.parse_args(argv))


def test_every_field_is_an_option_and_text_is_read_as_the_api_reads_it():
    assert parse() == Example()
    config = parse("--steps", "3", "--rate", "1e-3", "--name", "x", "--no-greedy", "--overrides", '{"a": 1}')
    assert config == Example(steps=3, rate=0.001, name="x", greedy=False, overrides={"a": 1})
    for argv, said in [
        (("--steps", "٣"), "steps: expected a whole number"),
        (("--steps", " 3"), "steps: expected a whole number"),
        (("--steps", "3.0"), "steps: expected a whole number"),
        (("--rate", "nan"), "rate: must be a finite number"),
        (("--rate", " 1"), "rate: expected a number"),
        (("--rate", "1e400"), "rate: must be a finite number"),
        (("--overrides", "[1]"), "overrides: takes a JSON object"),
        (("--overrides", "{not json"), "overrides: takes a JSON object"),
        (("--overrides", '{"a": NaN}'), "overrides: takes a JSON object"),
        (("--steps", "0"), "steps: at least 1."),  # the config's own validate()
    ]:
        with pytest.raises(ValueError, match=said):
            parse(*argv)
    assert parse("--steps", "3", "--steps", "5").steps == 5  # as argparse: the last one given


def test_aliases_and_negations_set_the_same_field():
    assert parse("--n", "4", aliases={"steps": ("--n",)}).steps == 4
    assert parse("--sampled", negations={"greedy": "--sampled"}).greedy is False


def test_each_option_says_its_fields_help_and_default():
    parser = argparse.ArgumentParser()
    add_config_arguments(parser, Example)
    helps = {a.dest: a.help for a in parser._actions}  # argparse keeps its options only there
    assert helps["rate"] == "a rate of 50%% (default: 0.5)"  # % doubled: argparse formats help with it
    assert helps["overrides"] == "run overrides (default: '{}')"


@pytest.mark.parametrize("config_class", [RLConfig, ExpertIterationConfig])
def test_the_training_commands_take_every_field_of_their_config(config_class):
    from training.rl import expert_iteration, trainer

    main = trainer.main if config_class is RLConfig else expert_iteration.main
    with pytest.raises(SystemExit) as exited:
        main(["--policy", "p", flag(dataclasses.fields(config_class)[0].name), "not a value"])
    assert exited.value.code == 2  # the parser's error, not a traceback
    assert set(field_help(config_class)) == {f.name for f in dataclasses.fields(config_class)}


def test_run_pipeline_takes_every_field_of_the_loops_config_with_its_help(db):
    parser = load_command_class("training", "run_pipeline").create_parser("manage.py", "run_pipeline")
    options = {a.option_strings[0]: a for a in parser._actions}  # argparse keeps its options only there
    helps = field_help(PipelineConfig)
    for f in dataclasses.fields(PipelineConfig):
        assert options[flag(f.name)].help.startswith(helps[f.name].replace("%", "%%")), f.name  # no drift
    # The options of before stay: --rl, --annotator-weighted, --reward-model-from-scratch, --ppo-iterations.
    namespace = parser.parse_args(["--rl", "grpo", "--annotator-weighted", "--reward-model-from-scratch"])
    config = config_from_arguments(PipelineConfig, {**vars(namespace), "ppo_iterations": None})
    assert (config.rl_kind, config.annotator_correct_first, config.reward_model_from_policy) == ("grpo", False, False)
    with pytest.raises(Exception, match="ppo: takes a JSON object"):
        call_command("run_pipeline", "--ppo", "[1]")


def test_a_form_and_the_api_read_a_config_by_the_same_function():
    assert config_from_input(Example, {"steps": "4", "greedy": "false"}) == Example(steps=4, greedy=False)
    with pytest.raises(ValueError, match="steps: expected a whole number"):
        config_from_input(Example, {"steps": "٣"})


def test_a_field_with_choices_takes_only_those_from_every_reader():
    with pytest.raises(ValueError, match="annotator_wrong_pairs: one of steps, errors, tie; got 'both'"):
        config_from_input(PipelineConfig, {"annotator_wrong_pairs": "both"})
    with pytest.raises(Exception, match="invalid choice"):
        call_command("run_pipeline", "--annotator-wrong-pairs", "both")
