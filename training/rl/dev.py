"""The dev tasks an RL run's checkpoints are judged on, and their figures (plain Python, no Django).

One rule for the app's RL runs (training/rl/services.py), the loop's plan and the benchmarks:
the dev environment given, else the environment's fresh variant where it has one (a world no
RL step trains on), else the environment itself; its tasks are a fixed random sample.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from core.intervals import bootstrap
from training.envs.registry import variant_of
from training.evaluation.metrics import GREEDY_SUCCESS, episode_figures, mean_of_figures
from training.rl.config import RLConfig, deploy_words

DEPLOY_SUCCESS = "deploy_success"  # dev success at the deploy temperature: what checkpoints are chosen on


def dev_world(environment: str, dev_environment: str, size: int, *, get: Callable):
    """(the environment RL is judged in, its dev tasks); `get(name)` gives an environment by name
    (the app's registry, with the environments of its settings, or training.envs.registry's)."""
    name = dev_environment or variant_of(environment, "fresh")
    dev = get(name)
    return dev, dev_sample(dev, fresh=name != environment, size=size)


def dev_sample(env, *, fresh: bool, size: int) -> list:
    """The dev tasks checkpoints are judged on: the dev split, or every split of a fresh world
    (no RL step trains on it), as a fixed random sample of `size` (0: all), so every kind of
    question is in it whatever the tasks' order."""
    tasks = [t for split in (("train", "dev", "eval") if fresh else ("dev",)) for t in env.tasks(split)]
    if size and len(tasks) > size:
        tasks = random.Random(0).sample(tasks, size)
    return tasks


class EvaluationCancelled(Exception):
    """A cancel asked for while the dev tasks were being played (honoured between rollout chunks)."""


def dev_figures(
    model, tokenizer, runner, tasks, config: RLConfig, *, seed: int, chat=None, ranks=None, should_stop=None
) -> dict:
    """Rubric figures of the policy on the dev tasks (training/evaluation/metrics.py),
    `eval_samples` episodes per task at `eval_temperature`, one greedy episode per task (when
    `eval_greedy`, and always when the policy is deployed greedy), and the figures at
    `deploy_temperature` that checkpoints are chosen on (`deploy_success`, `deploy_episodes`,
    `deploy_low`, `deploy_high`): the greedy or sampled ones when it is one of those, else
    `eval_samples` episodes per task played at it. In a data-parallel run each process plays its
    share. `config` is an RLConfig or an ExpertIterationConfig."""
    # Lazy: core.ranks loads torch, which the web process (it imports this module) never does.
    from core.ranks import Ranks

    # Lazy: training.policy.rollout loads torch, which the web process (it imports this module) never does.
    from training.policy.rollout import RolloutConfig, rollout

    ranks = ranks or Ranks()

    def check(_fraction: float) -> None:  # one process only: ranks must all play every chunk
        if should_stop is not None and not ranks.on and should_stop():
            raise EvaluationCancelled()

    def play(temperature: float, samples: int) -> list[tuple[str, dict]]:
        """(task id, figures) of each episode, every process's, in task order."""
        repeated = [t for t in tasks for _ in range(samples)]
        mine = ranks.mine(len(repeated))
        episodes = rollout(
            model,
            tokenizer,
            runner,
            [repeated[i] for i in mine],
            RolloutConfig(
                temperature=temperature,
                batch_size=config.rollout_batch_size,
                max_action_tokens=config.max_action_tokens,
                max_context=config.max_context,
            ),
            seeds=[seed * 7 + 500_000 + i for i in mine],
            chat=chat,
            progress=check,
        )
        return ranks.gather([(e.task.external_id, episode_figures(e)) for e in episodes], mine)

    deploy = config.deploy_temperature
    episodes = play(config.eval_temperature, config.eval_samples)
    figures = {
        **mean_of_figures([f for _, f in episodes]),
        "episodes": len(episodes),
        "temperature": config.eval_temperature,
    }
    figures["success_low"], figures["success_high"] = _interval(episodes, seed)
    at_deploy = episodes if deploy == config.eval_temperature else None
    if (config.eval_greedy or deploy == 0) and config.eval_temperature > 0:
        greedy = play(0.0, 1)
        figures[GREEDY_SUCCESS], figures["greedy_episodes"] = (
            mean_of_figures([f for _, f in greedy])["success"],
            len(greedy),
        )
        figures["greedy_low"], figures["greedy_high"] = _interval(greedy, seed)
        at_deploy = greedy if deploy == 0 else at_deploy
    if at_deploy is None:
        at_deploy = play(deploy, config.eval_samples)
    figures["deploy_temperature"] = deploy
    figures[DEPLOY_SUCCESS], figures["deploy_episodes"] = (
        mean_of_figures([f for _, f in at_deploy])["success"],
        len(at_deploy),
    )
    figures["deploy_low"], figures["deploy_high"] = _interval(at_deploy, seed)
    return figures


def dev_episodes_words(config: RLConfig) -> str:
    """The episodes each dev task gets, in words: "2 sampled at T=1 and 1 greedy"."""
    greedy = (config.eval_greedy or config.deploy_temperature == 0) and config.eval_temperature > 0
    deploy = config.deploy_temperature
    extra = deploy > 0 and deploy != config.eval_temperature
    return (
        f"{config.eval_samples} sampled at T={config.eval_temperature:g}"
        + (" and 1 greedy" if greedy else "")
        + (f" and {config.eval_samples} at T={deploy:g}, the deploy temperature" if extra else "")
    )


def dev_success_words(figures: dict) -> str:
    """One evaluation's dev success in words, what checkpoints are chosen on first:
    "dev success 80.6% greedy (what is deployed; 160 episodes), 55.0% at T=1 (320 episodes)"."""
    deployed = deploy_words(figures["deploy_temperature"])
    words = (
        f"dev success {figures[DEPLOY_SUCCESS]:.1%} {'greedy' if deployed == 'greedy' else 'at ' + deployed} "
        f"(what is deployed; {figures['deploy_episodes']} episodes)"
    )
    if figures["temperature"] != figures["deploy_temperature"]:
        words += f", {figures['success']:.1%} at T={figures['temperature']:g} ({figures['episodes']} episodes)"
    if GREEDY_SUCCESS in figures and figures["deploy_temperature"] != 0:
        words += f", {figures[GREEDY_SUCCESS]:.1%} greedy"
    return words


def best_words(best: dict | None, key: str, deploy_temperature: float) -> str:
    """The kept checkpoint in a run's last message, and what it was chosen on
    (" The best checkpoint, chosen on greedy dev success: iteration 5 (82.0%).")."""
    if not best:
        return ""
    success = best["dev"].get(DEPLOY_SUCCESS)
    return f" The best checkpoint, chosen on {deploy_words(deploy_temperature)} dev success: {key} {best[key]}" + (
        f" ({success:.1%})." if success is not None else "."
    )


def _interval(episodes: list[tuple[str, dict]], seed: int) -> tuple[float, float]:
    """The 95% interval of dev success over tasks (the one interval, core.intervals.bootstrap), from
    each episode's (task id, figures)."""
    by_task: dict[str, list[float]] = {}
    for task, figures in episodes:
        by_task.setdefault(task, []).append(figures["success"])
    result = bootstrap(list(by_task.values()), seed=seed)
    return (result["low"], result["high"]) if result["mean"] is not None else (0.0, 1.0)
