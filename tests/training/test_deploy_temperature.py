"""Choosing on what a user deploys (issue 54): the best checkpoint, the collapse stop and the
loop's choice between methods read dev success at the deploy temperature (greedy by default),
not a pool of T=1 and greedy episodes in which T=1 weighs twice as much; the evaluation's best
temperature offers greedy and is chosen on enough tasks of every kind; a limited set of tasks
holds every kind of question."""

from collections import Counter
from types import SimpleNamespace

import pytest

from tests.policy_fixtures import tiny_policy_dir
from tests.training.ppo_fixtures import World
from training.envs.registry import get_environment
from training.rl.config import ExpertIterationConfig, RLConfig
from training.rl.watch import clearly_better, collapse


def dev(t1: float, greedy: float, *, tasks: int = 160, deploy: float = 0.0, at_deploy: float | None = None) -> dict:
    """Dev figures as training/rl/dev.py `dev_figures` records them: two episodes per task at T=1,
    one greedy, and the figure at the deploy temperature."""
    figures = {
        "success": t1,
        "episodes": 2 * tasks,
        "temperature": 1.0,
        "greedy_success": greedy,
        "greedy_episodes": tasks,
        "deploy_temperature": deploy,
    }
    if deploy == 0:
        figures |= {"deploy_success": greedy, "deploy_episodes": tasks}
    else:
        figures |= {"deploy_success": at_deploy, "deploy_episodes": 2 * tasks}
    return figures


# PPO's dev figures in issue 54: T=1 rose while greedy fell from 90.0% to 80.6% by iteration 30.
START, ITERATION_30 = dev(0.55, 0.900), dev(0.80, 0.806)


def test_a_checkpoint_whose_t1_rises_while_greedy_falls_is_not_the_best():
    margin = RLConfig().best_margin
    assert not clearly_better(ITERATION_30, START, margin)  # pooled, T=1 outvoted greedy: it was chosen
    assert clearly_better(dev(0.50, 0.97), START, margin)  # a greedy gain is one
    # Deployed at T=0.7: the figure at that temperature decides, not greedy nor T=1.
    start = dev(0.55, 0.90, deploy=0.7, at_deploy=0.60)
    assert clearly_better(dev(0.50, 0.85, deploy=0.7, at_deploy=0.75), start, margin)
    assert not clearly_better(dev(0.90, 0.99, deploy=0.7, at_deploy=0.58), start, margin)


def test_the_collapse_stop_fires_on_a_greedy_fall_the_pool_hid():
    state = {"evaluations": [{"iteration": 0, "rm_score": 0.1, "dev": START}], "best": {"iteration": 0}}
    entry = {"iteration": 30, "rm_score": 0.9, "dev": dict(ITERATION_30)}
    message = collapse(state, entry, RLConfig())
    assert message and entry["collapse"]
    assert "greedy dev success (what is deployed) fell to 80.6% from the start's 90.0%" in message
    assert "at T=1: 80.0%, the start's 55.0%" in message  # T=1 beside
    assert "the best by greedy dev success stays iteration 0" in message
    # Deployed at T=0.7, the same greedy fall is not what the run is stopped on.
    held = {"iteration": 30, "rm_score": 0.9, "dev": dev(0.80, 0.806, deploy=0.7, at_deploy=0.62)}
    state["evaluations"][0]["dev"] = dev(0.55, 0.90, deploy=0.7, at_deploy=0.60)
    assert collapse(state, held, RLConfig(deploy_temperature=0.7)) is None


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from training.policy.model_io import load_policy

    return load_policy(tiny_policy_dir(tmp_path_factory.mktemp("deploy") / "policy"))


@pytest.mark.parametrize(
    ("chosen", "deploy_episodes", "greedy"),
    [
        ({"eval_greedy": False}, 3, True),  # deployed greedy: greedy is played even when not asked
        ({"deploy_temperature": 1.0, "eval_greedy": False}, 6, False),  # the sampled episodes are at it
        ({"deploy_temperature": 0.5, "eval_greedy": False}, 6, False),  # played at it: 2 per task
        ({"deploy_temperature": 0.5}, 6, True),
    ],
)
def test_dev_figures_play_what_the_deploy_temperature_needs(tiny, chosen, deploy_episodes, greedy):
    from training.rl.dev import dev_figures

    model, tokenizer = tiny
    world = World(get_environment("encyclopedia"))
    for config in (
        RLConfig(eval_samples=2, rollout_batch_size=8, **chosen),
        ExpertIterationConfig(eval_samples=2, rollout_batch_size=8, **chosen),
    ):
        figures = dev_figures(model, tokenizer, world.runner, world.split("dev", 3), config, seed=0)
        assert figures["episodes"] == 6 and figures["temperature"] == 1.0
        assert figures["deploy_temperature"] == config.deploy_temperature
        assert figures["deploy_episodes"] == deploy_episodes and ("greedy_success" in figures) is greedy
        if config.deploy_temperature == 0:
            assert (figures["deploy_success"], figures["deploy_low"]) == (
                figures["greedy_success"],
                figures["greedy_low"],
            )
        if config.deploy_temperature == 1.0:
            assert figures["deploy_success"] == figures["success"]


def test_a_deploy_temperature_out_of_range_is_refused():
    assert any("deploy_temperature" in p for p in RLConfig(deploy_temperature=-0.1).validate())
    assert any("deploy_temperature" in p for p in ExpertIterationConfig(deploy_temperature=2.5).validate())
    assert not RLConfig(deploy_temperature=0.7).validate()


def method_run(kind: str, pk: int, evaluations: list[dict], *, best: int, **config):
    key = "round" if kind == "expert_iteration" else "iteration"
    return SimpleNamespace(
        pk=pk,
        kind=kind,
        config=config,
        summary={
            f"best_{key}": best,
            "best_policy_id": 100 + pk,
            "evaluations": [{key: i, **e} for i, e in evaluations],
        },
    )


def test_the_loop_keeps_the_method_that_gains_at_the_deploy_temperature():
    from training.loop.rounds import method_choice, method_dev_figures

    start = {"dev_success": 0.55, "dev_greedy_success": 0.90}
    ppo = method_run("ppo", 1, [(0, start), (30, {"dev_success": 0.80, "dev_greedy_success": 0.806})], best=30)
    exit_ = method_run(
        "expert_iteration", 2, [(0, start), (2, {"dev_success": 0.60, "dev_greedy_success": 0.93})], best=2
    )
    figures = [method_dev_figures(run) for run in (ppo, exit_)]
    # The mean of T=1 and greedy gained +7.8 for PPO against +4.0 for expert iteration: PPO was kept.
    chosen = method_choice(figures)
    assert chosen["kind"] == "expert_iteration" and chosen["policy_id"] == 102
    assert figures[0]["gain"] == pytest.approx(-0.094) and figures[1]["gain"] == pytest.approx(0.03)
    assert figures[0]["dev_t1"] == 0.80 and figures[0]["start_dev_t1"] == 0.55  # T=1 reported beside
    # Deployed at T=0.5 (the loop plays the methods' sampled dev episodes at it): the sampled figure.
    sampled = {"deploy_temperature": 0.5, "eval_temperature": 0.5}
    ppo = method_run(
        "ppo", 1, [(0, start), (30, {"dev_success": 0.80, "dev_greedy_success": 0.806})], best=30, **sampled
    )
    exit_ = method_run(
        "expert_iteration", 2, [(0, start), (2, {"dev_success": 0.60, "dev_greedy_success": 0.93})], best=2, **sampled
    )
    figures = [method_dev_figures(run) for run in (ppo, exit_)]
    assert method_choice(figures)["kind"] == "ppo" and figures[0]["deploy_temperature"] == 0.5


def test_the_loop_gives_both_methods_its_deploy_temperature():
    from training.loop.config import PipelineConfig
    from training.loop.rounds import _expert_iteration_config, _rl_config

    loop_round = SimpleNamespace(
        start_policy_id=1, reference_policy_id=1, reward_model_id=2, loop="deploy", number=1, environment="encyclopedia"
    )
    greedy = PipelineConfig()
    assert _rl_config(loop_round, greedy, 0)["deploy_temperature"] == 0.0
    assert "eval_temperature" not in _expert_iteration_config(loop_round, greedy, 0)
    warm = PipelineConfig(deploy_temperature=0.5)
    for settings in (_rl_config(loop_round, warm, 0), _expert_iteration_config(loop_round, warm, 0)):
        assert settings["deploy_temperature"] == settings["eval_temperature"] == 0.5


@pytest.mark.django_db
def test_the_pipeline_refuses_methods_judged_at_another_temperature_than_deployed():
    from training.pipeline import PipelineConfig, pipeline_problems

    problems = pipeline_problems(PipelineConfig(deploy_temperature=0.5, ppo={"eval_temperature": 1.0}))
    assert any("ppo eval_temperature: 1.0 while deploy_temperature is 0.5" in p for p in problems)
    assert any(
        "deploy_temperature: 0 (greedy) to 2" in p for p in pipeline_problems(PipelineConfig(deploy_temperature=3))
    )
    assert not any("deploy_temperature" in p for p in pipeline_problems(PipelineConfig(deploy_temperature=0.5)))


def test_the_best_temperature_is_chosen_on_enough_tasks_of_every_kind():
    from training.evaluation.services import DEV_TEMPERATURE_TASKS, temperature_tasks

    # The loop's unseen world has 31 dev tasks: its temperature is chosen on the fresh world, every split.
    unseen = get_environment("encyclopedia-unseen")
    world, tasks, chosen_on = temperature_tasks(unseen, "eval")
    assert world.name == "encyclopedia-fresh" and chosen_on == "every split"
    assert len(tasks) == DEV_TEMPERATURE_TASKS == 300
    kinds = Counter(t.metadata["qtype"] for t in tasks)
    everything = Counter(t.metadata["qtype"] for s in ("train", "dev", "eval") for t in world.tasks(s))
    assert set(kinds) == set(everything)
    for kind, n in everything.items():  # each kind in proportion, within a task
        assert abs(kinds[kind] - 300 * n / sum(everything.values())) <= 1
    # Without a fresh variant, the dev split (train when dev is evaluated).
    codeword = get_environment("codeword")
    assert temperature_tasks(codeword, "eval")[2] == "dev" and len(temperature_tasks(codeword, "eval")[1]) == 300
    assert temperature_tasks(codeword, "dev")[2] == "train"


def test_a_limited_set_of_tasks_holds_every_kind_of_question():
    from training.envs.services import environment_tasks

    env = get_environment("encyclopedia-unseen")
    every = env.tasks("eval")
    chosen = environment_tasks(env, "eval", 64)
    assert len(chosen) == 64 and len({t.external_id for t in chosen}) == 64
    assert {t.metadata["qtype"] for t in chosen} == {t.metadata["qtype"] for t in every}  # the first 64 lacked two
    kinds, all_kinds = Counter(t.metadata["qtype"] for t in chosen), Counter(t.metadata["qtype"] for t in every)
    for kind, n in all_kinds.items():
        assert abs(kinds[kind] - 64 * n / len(every)) <= 1
    order = {t.external_id: i for i, t in enumerate(every)}
    assert [order[t.external_id] for t in chosen] == sorted(order[t.external_id] for t in chosen)  # the split's order
    assert environment_tasks(env, "eval") == every and environment_tasks(env, "eval", 1000) == every
    named = [every[5].external_id, every[0].external_id]
    assert [t.external_id for t in environment_tasks(env, "eval", 1, task_ids=named)] == named  # named: as named
