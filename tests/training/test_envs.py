"""The environment interface: two built-ins of different kinds, a user's class by dotted path, and the
runner's limits and refusals, which hold whatever the environment."""

from __future__ import annotations

import jsonschema
import pytest

from training.envs.arithmetic import ArithmeticEnvironment, CalculatorError, calculate
from training.envs.base import EpisodeRunner, Limits, Rubric
from training.envs.registry import UnknownEnvironment, environment_names, get_environment


@pytest.mark.parametrize("name", ["encyclopedia", "arithmetic"])
def test_each_built_in_declares_openai_tools_with_valid_schemas_and_split_tasks(name):
    env = get_environment(name)
    tools = env.tools()
    assert "answer" in {t.name for t in tools} and len(tools) >= 2
    for tool in tools:
        declared = tool.as_openai()
        assert declared["type"] == "function" and declared["function"]["name"] == tool.name
        jsonschema.Draft202012Validator.check_schema(declared["function"]["parameters"])
    splits = {s: env.tasks(s) for s in ("train", "dev", "eval")}
    assert all(splits.values())
    ids = [t.external_id for tasks in splits.values() for t in tasks]
    assert len(ids) == len(set(ids))  # no task in two splits
    assert env.opening_messages(splits["eval"][0])[-1] == {"role": "user", "content": splits["eval"][0].prompt}


def test_the_encyclopedia_is_solved_through_its_tools_and_scored_by_its_rubric():
    env = get_environment("encyclopedia")
    task = next(t for t in env.tasks("train") if t.metadata["hops"] == 1)
    episode = EpisodeRunner(env, Limits(max_steps=10)).start(task)
    entity = task.prompt.rstrip("?").split(" of ")[-1].split(" the ")[-1]
    results = episode.call("search", {"query": task.prompt}).content
    assert results.startswith("[0]")
    episode.call("open", {"n": 0})
    episode.call("answer", {"text": task.reference})
    outcome = episode.outcome()
    assert episode.done and outcome.correct and outcome.parts["steps"] == 3 and outcome.parts["tool_errors"] == 0
    assert [s["kind"] for s in episode.record.steps] == ["action", "observation", "action", "observation", "answer"]
    assert episode.record.steps[0] == {"kind": "action", "tool": "search", "arguments": {"query": task.prompt}}
    assert entity  # the prompt names the entity the search looks for


def test_arithmetic_right_and_wrong_answers_and_a_safe_calculator():
    env = ArithmeticEnvironment(seed=3)
    task = env.tasks("eval")[0]
    runner = EpisodeRunner(env)
    right = runner.start(task)
    right.call("calculate", {"expression": "2 * (3 + 4)"})
    right.call("answer", {"text": f"The answer is {task.reference}."})
    assert right.outcome().correct and right.outcome().parts["steps"] == 2
    wrong = runner.start(task)
    wrong.call("answer", {"text": str(int(task.reference) + 1)})
    assert not wrong.outcome().correct
    assert calculate("48 * 17 - 95") == 721
    for hostile in ("__import__('os')", "9 ** 9 ** 9", "1 / 0", "x" * 300, "[1, 2]"):
        with pytest.raises(CalculatorError):
            calculate(hostile)
    # Worlds from other seeds share no task.
    assert not {t.prompt for t in env.tasks("eval")} & {t.prompt for t in ArithmeticEnvironment(seed=4).tasks("eval")}


def test_malformed_calls_are_error_observations_that_use_a_step():
    env = get_environment("arithmetic")
    episode = EpisodeRunner(env, Limits(max_steps=4)).start(env.tasks("train")[0])
    unknown = episode.call("browse", {"url": "x"})
    assert unknown.error and "unknown tool 'browse'" in unknown.content
    bad = episode.call("calculate", {"expr": "1+1"})
    assert bad.error and "bad arguments for calculate" in bad.content
    not_object = episode.call("calculate", "1+1")
    assert not_object.error and "must be a JSON object" in not_object.content
    assert episode.record.tool_errors == 3 and episode.record.calls == 3 and not episode.done
    episode.call("calculate", {"expression": "1/0"})  # the environment's own error result
    assert episode.record.tool_errors == 4 and episode.done and episode.record.truncated
    with pytest.raises(RuntimeError):
        episode.call("answer", {"text": "2"})


def test_the_runner_ends_a_loop_and_owns_the_limits():
    env = get_environment("arithmetic")
    looped = EpisodeRunner(env, Limits(max_steps=20, loop_repeats=3)).start(env.tasks("train")[0])
    for _ in range(3):
        looped.call("calculate", {"expression": "1+1"})
    assert looped.done and looped.record.loop and looped.outcome().parts["loop"] is True


def test_a_users_environment_by_dotted_path_goes_through_the_runner():
    env = get_environment("tests.helpers:Counter")
    task = env.tasks("eval")[0]
    episode = EpisodeRunner(env).start(task)
    for _ in range(2):
        episode.call("press", {})
    episode.call("answer", {"text": "2"})
    # The runner's own figures join the environment's rubric parts, under one vocabulary.
    assert episode.outcome() == Rubric(
        correct=True,
        utility=1.0,
        parts={"steps": 3, "tool_errors": 0, "loop": False, "truncated": False, "answered": True, "presses": 2},
    )
    assert get_environment("tests.helpers.Counter").name == "counter"


def test_unknown_names_are_refused_with_the_known_ones():
    assert {"encyclopedia", "arithmetic"} <= set(environment_names())
    with pytest.raises(
        UnknownEnvironment,
        match="known: arithmetic, codeword, encyclopedia, encyclopedia-fresh, encyclopedia-unseen, or give a class",
    ):
        get_environment("nope")
    # The MCP adapter needs a server: it is listed once configured with one.
    assert "mcp" not in environment_names()
    assert "tickets" in environment_names({"tickets": {"class": "mcp", "options": {}}})
    with pytest.raises(UnknownEnvironment, match="not a subclass"):
        get_environment("training.envs.base:Tool")
    with pytest.raises(UnknownEnvironment, match="cannot import"):
        get_environment("no.such.module:Env")


@pytest.mark.parametrize("name", ["encyclopedia", "arithmetic"])
def test_an_episode_is_stored_as_a_canonical_trajectory_an_import_accepts(name):
    from annotate.trajectory_formats import parse_trajectory

    env = get_environment(name)
    episode = EpisodeRunner(env).start(env.tasks("dev")[0])
    episode.call("answer", {"text": "I do not know"})
    parsed = parse_trajectory(episode.trajectory(agent="test-agent"))
    assert parsed.steps == episode.record.steps and parsed.answer == "I do not know"
    assert parsed.outcome["correct"] is False and parsed.metadata["environment"] == name


def test_the_ml_modules_run_without_django():
    import subprocess
    import sys

    code = (
        "import sys; import training.envs.registry as r; r.get_environment('arithmetic'); "
        "r.get_environment('encyclopedia'); import training.envs.mcp, training.policy.chat, "
        "training.policy.parsers, training.policy.rollout, training.policy.bc, training.rl.trainer, "
        "training.rl.scorers, training.evaluation.episodes, training.evaluation.metrics, training.finetune.train, "
        "training.policy.conversations; "
        "assert 'django' not in sys.modules, 'django was imported'"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": "."}
    )
    assert result.returncode == 0, result.stderr[-800:]


def test_the_examples_in_the_environments_doc_run():
    import re
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "environments.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", doc, flags=re.DOTALL)
    namespace: dict = {}
    exec(blocks[0], namespace)  # the TicketDesk class
    desk = namespace["TicketDesk"]()
    episode = EpisodeRunner(desk).start(desk.tasks("eval")[0])
    episode.call("close", {"id": 42})
    episode.call("answer", {"text": "closed"})
    assert episode.outcome().correct
    exec(blocks[1], {})  # the arithmetic walk-through


def test_the_unseen_world_shares_no_name_with_any_world_training_may_see():
    from training.envs.base import TRAINING_SEEDS
    from training.envs.encyclopedia.environment import EncyclopediaEnvironment, training_world_names

    unseen = get_environment("encyclopedia-unseen")
    names = unseen.browser.corpus.names
    assert unseen.name == "encyclopedia-unseen" and unseen.seed >= 10_000 and len(names) > 300
    assert not names & training_world_names()
    for task in unseen.tasks("eval")[:50]:  # no task mentions or answers with a name training could have seen
        words = set(task.prompt.replace("?", "").split()) | set(task.reference.split())
        assert not words & training_world_names(), task
    assert len(unseen.tasks("eval")) >= 124
    assert max(TRAINING_SEEDS) < 10_000
    with pytest.raises(ValueError, match="10000 or above"):
        EncyclopediaEnvironment(seed=5, unseen=True)
    assert "encyclopedia-unseen" in environment_names()


def test_the_fresh_world_is_one_behaviour_cloning_never_imitates():
    from training.envs.base import FRESH_WORLD_SEED, TRAINING_SEEDS
    from training.envs.registry import variant_of
    from training.policy.bc_config import BCConfig, extra_worlds_problem

    fresh = get_environment("encyclopedia-fresh")
    assert fresh.name == "encyclopedia-fresh" and fresh.seed == FRESH_WORLD_SEED == max(TRAINING_SEEDS)
    assert fresh.tasks("dev") and {t.prompt for t in fresh.tasks("dev")}.isdisjoint(
        t.prompt for t in get_environment("encyclopedia").tasks("dev")
    )
    assert extra_worlds_problem(BCConfig().extra_worlds) is None  # the default imitates seeds 1-20
    assert extra_worlds_problem(FRESH_WORLD_SEED - 1) is None
    assert "kept fresh" in extra_worlds_problem(FRESH_WORLD_SEED)
    assert variant_of("encyclopedia", "fresh") == "encyclopedia-fresh"
    assert variant_of("encyclopedia", "unseen") == "encyclopedia-unseen"
    assert variant_of("arithmetic", "fresh") == "arithmetic"  # no variant: the environment itself
