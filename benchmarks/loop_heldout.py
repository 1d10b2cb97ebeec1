"""The loop's policies and reward model on held-out worlds no training step saw, overall and per
habit situation (plain Python, no Django): what an outside evaluation of `run_pipeline`
measures, and the one command behind issue 54's tables.

    .venv/bin/python benchmarks/loop_heldout.py --policy start=DIR --policy best=DIR --policy last=DIR \\
        [--worlds 10001 10002] [--tasks 300] [--temperatures 0.3 0.5 0.7] [--temperature-tasks 300] \\
        [--pass-at 1 4 16] [--reward-model RM_DIR] [--best-of 4] [--json FILE]

Each world is an encyclopedia generated from its seed with `unseen=True` (no name shared with
any training world). `--tasks N` plays N of its tasks taken across the kinds of question
(training/envs/sampling.py `spread_prefix`: every kind in proportion, never the first N by id,
which hold only some kinds); 0 plays them all.

Per world and per policy, greedy (one episode per task) and at T=1 (one per task, the same
seeds for every policy): rubric success overall and in each habit situation (the task's
metadata "situation", training/envs/encyclopedia/habits.py), each a share with its 95% Wilson
interval and n, and the paired difference from the first policy (the start) with a 95%
bootstrap interval over tasks; the share of episodes that answer without opening a page.

The start at its best temperature (`--temperatures`, empty to skip): before any held-out world
is played, the start plays each candidate, greedy (0) among them, one episode on each of
`--temperature-tasks` tasks of the fresh world (training.envs.base FRESH_WORLD_SEED, the world
RL judges its checkpoints on and no training uses for data; training/rl/dev.py `dev_world`),
taken across kinds; the best dev success is chosen (a tie goes to the lower temperature). On
each held-out world the start plays at that temperature, with its paired gain over its own
greedy, and each other policy's greedy gets its paired gain over it: the baseline a method
must beat, since a lower temperature is free.

pass@k (`--pass-at 1 4 16`, none by default): per policy, n = max(k) samples per task at T=1,
and the unbiased pass@k (training/evaluation/pass_at_k.py) per situation and overall, so that
sharpening (pass@1 up, pass@16 flat) is told apart from learning (both up).

With a reward model: best-of-n of the start at T=1 (n samples per task, the highest score
kept), overall and per habit situation (how often its favourite is right, paired against one
sample); the answer-swap probe (each of its episodes with only its answer changed, right against
wrong), overall, by whether the right answer is on a page read and per situation; natural pairs
(two of its samples of one task, one correct and one not) by the rubric; and the mean score by
(steps, correct).

Prints one JSON line per world and then the tables (per policy a line overall and one per
situation); `--json FILE` writes everything: {"temperature_choice": {...}, "<world seed>":
{"tasks", "policies": {label: {"greedy"|"t1": {success, n, gain, situations: {...}}, "pass_at_k"}},
"best_temperature", "best_of_n", "reward_model"}}. benchmarks/reachability.py measures pass@k
of one policy alone.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import torch

from benchmarks._common import markdown_table  # first: it puts the project's packages on the path
from core.intervals import bootstrap, share_interval
from training.envs.base import EpisodeRunner
from training.envs.encyclopedia.environment import EncyclopediaEnvironment
from training.envs.encyclopedia.habits import OTHER, SITUATIONS
from training.envs.registry import get_environment
from training.envs.sampling import spread_prefix
from training.evaluation.pass_at_k import pass_at_k
from training.policy.chat import ChatFormat
from training.policy.model_io import load_policy
from training.policy.rollout import RolloutConfig, rollout
from training.rl.dev import dev_world

MODES = (("greedy", 0.0), ("t1", 1.0))
BATCH = 64


@dataclass
class Policy:
    label: str
    directory: str
    model: object
    tokenizer: object
    chat: ChatFormat

    @classmethod
    def load(cls, label: str, directory: str) -> Policy:
        model, tokenizer = load_policy(directory)
        return cls(label, directory, model, tokenizer, ChatFormat.for_policy(tokenizer, directory))

    def play(self, runner, tasks: list, temperature: float, seeds: list[int]) -> list:
        """One episode per task, each with its seed."""
        config = RolloutConfig(temperature=temperature, batch_size=BATCH)
        return rollout(self.model, self.tokenizer, runner, tasks, config, seeds=seeds, chat=self.chat)


def paired_bootstrap(a: list[float], b: list[float], seed: int = 0, rounds: int = 2000) -> tuple[float, float, float]:
    """Mean of b - a over tasks with a 95% bootstrap interval (resampling tasks)."""
    rng = random.Random(seed)
    diffs = [y - x for x, y in zip(a, b)]
    means = sorted(statistics.fmean(rng.choices(diffs, k=len(diffs))) for _ in range(rounds))
    return statistics.fmean(diffs), means[int(0.025 * rounds)], means[int(0.975 * rounds)]


def guessed(episode) -> bool:
    """Answered without opening any page."""
    tools = [s.get("tool") for s in episode.steps if s.get("kind") == "action"]
    return episode.episode.record.answer is not None and "open" not in tools


def correct(episodes: list) -> list[float]:
    return [float(e.outcome.correct) for e in episodes]


def situation_indices(tasks: list) -> dict[str, list[int]]:
    """The indices of the tasks in each habit situation present, in SITUATIONS' order, OTHER last."""
    found = defaultdict(list)
    for i, task in enumerate(tasks):
        found[(task.metadata or {}).get("situation", OTHER)].append(i)
    return {name: found[name] for name in [*SITUATIONS, OTHER, *sorted(found)] if name in found}


def share(values: list[float]) -> tuple[float | None, float | None, float | None]:
    """(share right, Wilson 95% low, high) of 0/1 values."""
    mean = statistics.fmean(values) if values else None
    return (mean, *share_interval(sum(values), len(values)))


def success_cells(tasks: list, values: list[float], *, against: list[float] | None = None, seed: int = 0) -> dict:
    """Success overall and per situation: {success, n, gain (paired over `against`, when given),
    situations: {name: {success, n, gain}}}."""

    def cell(indices: list[int]) -> dict:
        mine = [values[i] for i in indices]
        row = {"success": share(mine), "n": len(mine)}
        if against is not None:
            row["gain"] = paired_bootstrap([against[i] for i in indices], mine, seed=seed)
        return row

    return {**cell(list(range(len(tasks)))), "situations": {s: cell(ix) for s, ix in situation_indices(tasks).items()}}


def pass_at_k_cells(policy: Policy, runner, tasks: list, ks: list[int], *, seed: int) -> dict:
    """pass@k at T=1 of each k, overall and per situation, from max(ks) samples per task: each
    {"pass@k": [mean, low, high] (95% bootstrap over tasks), "n": tasks}."""
    n = max(ks)
    samples = policy.play(
        runner, [t for t in tasks for _ in range(n)], 1.0, [seed * 104_729 + 3 + i for i in range(n * len(tasks))]
    )
    rights = [sum(e.outcome.correct for e in samples[i * n : (i + 1) * n]) for i in range(len(tasks))]

    def cell(indices: list[int]) -> dict:
        row: dict = {"n": len(indices)}
        for k in ks:
            figures = bootstrap([pass_at_k(n, rights[i], k) for i in indices], seed=seed)
            row[f"pass@{k}"] = [figures["mean"], figures["low"], figures["high"]]
        return row

    return {
        "samples": n,
        "temperature": 1.0,
        **cell(list(range(len(tasks)))),
        "situations": {s: cell(ix) for s, ix in situation_indices(tasks).items()},
    }


def fresh_dev_tasks(size: int) -> tuple:
    """(runner, tasks, seed) of the fresh world's dev tasks as RL judges checkpoints on them
    (every split of the world; training/rl/dev.py), the first `size` taken across kinds."""
    env, tasks = dev_world("encyclopedia", "", 0, get=get_environment)
    return EpisodeRunner(env), spread_prefix(tasks, size), env.seed


def unseen_world_tasks(seed: int, split: str, size: int) -> tuple:
    """(runner, tasks) of the unseen world of `seed` (all its splits, or one), `size` across kinds."""
    env = EncyclopediaEnvironment(seed=seed, unseen=True)
    tasks = [t for s in (("train", "dev", "eval") if split == "all" else (split,)) for t in env.tasks(s)]
    return EpisodeRunner(env), spread_prefix(tasks, size)


def choose_temperature(policy: Policy, temperatures: list[float], size: int) -> dict:
    """The policy's best temperature among greedy and `temperatures`, by success on the fresh
    world's dev tasks (one episode each, the same seeds for every candidate); a tie goes to the
    lower temperature."""
    runner, tasks, world = fresh_dev_tasks(size)
    candidates = {}
    for temperature in sorted({0.0, *temperatures}):
        episodes = policy.play(runner, tasks, temperature, [world * 1000 + i for i in range(len(tasks))])
        candidates[temperature] = success_cells(tasks, correct(episodes))
    chosen = max(candidates, key=lambda t: candidates[t]["success"][0])  # the first, the lowest, of a tie
    return {"world": world, "tasks": len(tasks), "candidates": candidates, "chosen": chosen}


def best_temperature_row(start: Policy, runner, tasks, choice: dict, played: dict, seed: int) -> dict:
    """The start at its chosen temperature on a held-out world, paired against its greedy; every
    other policy's greedy paired against it. `played`: label -> mode -> success values."""
    chosen = choice["chosen"]
    greedy = played[start.label]["greedy"]
    if chosen == 0.0:  # greedy is deterministic: its row is the greedy one
        values = greedy
    else:
        values = correct(start.play(runner, tasks, chosen, [seed * 1000 + i for i in range(len(tasks))]))
    return {
        "temperature": chosen,
        **success_cells(tasks, values, against=greedy, seed=seed),
        "greedy_gain_over_it": {
            label: success_cells(tasks, modes["greedy"], against=values, seed=seed)
            for label, modes in played.items()
            if label != start.label
        },
    }


def play_policies(policies: list[Policy], runner, tasks: list, seed: int) -> tuple[dict, dict]:
    """(each policy's rows greedy and at T=1, each policy's success values by mode)."""
    rows: dict = {}
    played: dict = {}
    for policy in policies:
        rows[policy.label], played[policy.label] = {}, {}
        for mode, temperature in MODES:
            episodes = policy.play(runner, tasks, temperature, [seed * 1000 + i for i in range(len(tasks))])
            values = played[policy.label][mode] = correct(episodes)
            against = None if policy is policies[0] else played[policies[0].label][mode]
            rows[policy.label][mode] = {
                **success_cells(tasks, values, against=against, seed=seed),
                "guess": statistics.fmean(map(guessed, episodes)) if episodes else 0.0,
                "steps": statistics.fmean(e.outcome.parts["steps"] for e in episodes) if episodes else 0.0,
            }
    return rows, played


def reward_model_figures(scorer, start: Policy, runner, tasks: list, n: int, seed: int) -> tuple[dict, dict]:
    """(best-of-n of the start at T=1 by the reward model, the reward model's probes)."""
    from rewardmodel.evaluate import ordering_accuracy  # the reward model's modules: only with --reward-model
    from rewardmodel.probes import Probed, answer_swap_accuracy, answer_swap_pairs
    from training.rl.scorers import episode_steps

    samples = start.play(
        runner, [t for t in tasks for _ in range(n)], 1.0, [seed * 7919 + 11 + i for i in range(n * len(tasks))]
    )
    scores = scorer.score_episodes([(e.task.prompt, episode_steps(e)) for e in samples])
    best = [max(range(n), key=lambda j: scores[i * n + j]) for i in range(len(tasks))]
    single = [float(samples[i * n].outcome.correct) for i in range(len(tasks))]
    chosen = [float(samples[i * n + j].outcome.correct) for i, j in enumerate(best)]
    # How often its favourite is right, overall and per habit situation, paired against one sample.
    situations = situation_indices(tasks)
    cells = success_cells(tasks, chosen, against=single, seed=seed)
    best_of_n = {
        **cells,
        "n": n,
        "tasks": cells["n"],
        "one_sample": share(single),
        "one_sample_situations": {name: share([single[i] for i in ix]) for name, ix in situations.items()},
    }
    probed = [
        Probed(task=e.task.external_id, prompt=e.task.prompt, steps=episode_steps(e), correct=bool(e.outcome.correct))
        for e in samples
    ]
    swaps = answer_swap_pairs(probed, limit=10**6, seed=seed)
    swap = answer_swap_accuracy(scorer, swaps)
    kinds = defaultdict(list)  # the swap by whether the path shows the right answer
    for pair in swaps:
        _prompt, right, _wrong = pair
        seen = " ".join(str(st.get("content", "")) for st in right if st.get("kind") == "observation")
        answer = next(st["text"] for st in reversed(right) if st.get("kind") == "answer")
        on_page = answer.lower().removeprefix("the ") in seen.lower()
        kinds["right answer on a page read" if on_page else "right answer on no page read"].append(pair)
    swap["by_evidence"] = {kind: answer_swap_accuracy(scorer, pairs) for kind, pairs in kinds.items()}
    situation_of = {tasks[i].prompt: name for name, ix in situations.items() for i in ix}  # a question, one situation
    by_situation = defaultdict(list)  # the swap in each habit situation, where the habit's mistakes are
    for pair in swaps:
        by_situation[situation_of[pair[0]]].append(pair)
    swap["by_situation"] = {
        name: answer_swap_accuracy(scorer, by_situation[name]) for name in situations if by_situation[name]
    }
    natural = []
    for i in range(len(tasks)):
        group = list(range(i * n, (i + 1) * n))
        natural += [
            (scores[a], scores[b], 1.0, 0.0)
            for a in group
            for b in group
            if samples[a].outcome.correct and not samples[b].outcome.correct
        ]
    by_shape = defaultdict(list)
    for e, s in zip(samples, scores):
        by_shape[(e.outcome.parts["steps"], bool(e.outcome.correct))].append(s)
    return best_of_n, {
        "answer_swap": swap,
        "natural_pairs": ordering_accuracy(natural),
        "mean_score_by_steps_correct": {
            f"{k[0]} steps, {'correct' if k[1] else 'wrong'}": [round(statistics.fmean(v), 3), len(v)]
            for k, v in sorted(by_shape.items())
            if len(v) >= 5
        },
    }


def percent(cell: tuple | list | None) -> str:
    """A share and its interval: '66.0% [60.5, 71.1]' (blank when there is none)."""
    if not cell or cell[0] is None:
        return ""
    return f"{100 * cell[0]:.1f}% [{100 * cell[1]:.1f}, {100 * cell[2]:.1f}]"


def points(gain: tuple | list | None) -> str:
    """A paired difference in points and its interval: '+6.0 [+1.2, +10.8]'."""
    return f"{100 * gain[0]:+.1f} [{100 * gain[1]:+.1f}, {100 * gain[2]:+.1f}]" if gain else ""


def cells_lines(label: str, row: dict) -> list[tuple[str, str, dict]]:
    """(policy, situation, cell) of a row overall and then per situation."""
    return [(label, "overall", row), *((label, name, cell) for name, cell in row["situations"].items())]


def print_temperature_choice(choice: dict) -> None:
    print(f"\nthe start's temperature, chosen on {choice['tasks']} tasks of the fresh world (seed {choice['world']}):")
    rows = [
        [
            "0 (greedy)" if temperature == 0 else f"{temperature:g}",
            percent(cells["success"]),
            cells["n"],
            "yes" if temperature == choice["chosen"] else "",
        ]
        for temperature, cells in choice["candidates"].items()
    ]
    print(markdown_table(["temperature", "dev success", "n", "chosen"], rows))


def print_pass_at_k(rows: dict[str, dict]) -> None:
    """The pass@k table of each policy's `pass_at_k` cells (label -> cells)."""
    first = next(iter(rows.values()))
    ks = [key for key in first if key.startswith("pass@")]
    print(f"\npass@k at T=1 ({first['samples']} samples per task, the unbiased estimator):")
    lines = [
        [policy, situation, cell["n"], *(percent(cell[k]) for k in ks)]
        for label, row in rows.items()
        for policy, situation, cell in cells_lines(label, row)
    ]
    print(markdown_table(["policy", "situation", "n", *ks], lines))


def print_world(seed: int, world: dict) -> None:
    print(f"\nworld {seed} ({world['tasks']} tasks)")
    lines = []
    for label, row in world["policies"].items():
        greedy, t1 = row["greedy"], row["t1"]
        for (policy, situation, g), (_, _, t) in zip(cells_lines(label, greedy), cells_lines(label, t1)):
            guess = f"{100 * greedy['guess']:.0f}%, {100 * t1['guess']:.0f}%" if situation == "overall" else ""
            lines.append(
                [policy, situation, g["n"], percent(g["success"]), points(g.get("gain"))]
                + [percent(t["success"]), points(t.get("gain")), guess]
            )
    header = ["policy", "situation", "n", "greedy", "greedy gain", "T=1", "T=1 gain", "guess greedy, T=1"]
    print(markdown_table(header, lines))
    if "best_temperature" in world:
        best = world["best_temperature"]
        name = f"{next(iter(world['policies']))} T={best['temperature']:g}"
        print(f"\nthe start at its best temperature ({name}: gain over its greedy), each greedy's gain over it:")
        cells = cells_lines(name, best)
        for label, row in best["greedy_gain_over_it"].items():
            cells += cells_lines(f"{label} greedy", row)
        lines = [[p, s, c["n"], percent(c["success"]), points(c["gain"])] for p, s, c in cells]
        print(markdown_table(["policy", "situation", "n", "success", "paired gain"], lines))
    if any("pass_at_k" in row for row in world["policies"].values()):
        print_pass_at_k({label: row["pass_at_k"] for label, row in world["policies"].items()})
    if "best_of_n" in world:
        b, rm = world["best_of_n"], world["reward_model"]
        print(
            f"\nbest-of-{b['n']} {percent(b['success'])} (one sample {percent(b['one_sample'])}, gain {points(b['gain'])})"
        )
        swap = rm["answer_swap"]
        evidence = ", ".join(f"{kind} {rate(v['accuracy'])} of {v['n']}" for kind, v in swap["by_evidence"].items())
        natural = rm["natural_pairs"]
        print(
            f"reward model: answer swap {rate(swap['accuracy'])} (n {swap['n']}: {evidence}), "
            f"natural pairs {rate(natural['accuracy'])} (n {natural['n']})"
        )
        print(f"mean score by shape: {rm['mean_score_by_steps_correct']}")
        print(f"\nper situation: how often its favourite of {b['n']} is right, and the answer swap there:")
        one = {"overall": b["one_sample"], **b["one_sample_situations"]}
        swaps = {"overall": swap, **swap["by_situation"]}
        lines = [
            [name, cell["n"], percent(one[name]), percent(cell["success"]), points(cell["gain"])]
            + [percent(_swap_cell(swaps.get(name)))]
            for name, cell in [("overall", {**b, "n": b["tasks"]}), *b["situations"].items()]
        ]
        header = ["situation", "tasks", "one sample", f"best-of-{b['n']}", "paired gain", "answer swap"]
        print(markdown_table(header, lines))


def rate(value: float | None) -> str:
    """A share as '58.4%', or '-' where there was nothing to measure (no pair)."""
    return "-" if value is None else f"{value:.1%}"


def _swap_cell(swap: dict | None) -> list | None:
    """An answer-swap result as a share cell (accuracy and its interval), None when it has no pair."""
    if not swap or swap.get("accuracy") is None:
        return None
    return [swap["accuracy"], *swap["accuracy_ci"]]


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--policy", action="append", required=True, help="LABEL=DIR; the first is the start (baseline)")
    parser.add_argument("--reward-model", default="")
    parser.add_argument("--worlds", nargs="+", type=int, default=[10_001, 10_002])
    parser.add_argument("--split", default="all", help="train, dev, eval or all (every task is unseen)")
    parser.add_argument("--best-of", type=int, default=4)
    parser.add_argument("--tasks", type=int, default=0, help="tasks per world, taken across kinds (0: all)")
    parser.add_argument(
        "--temperatures",
        nargs="*",
        type=float,
        default=[0.3, 0.5, 0.7],
        help="candidates for the start's best temperature besides greedy (none: skip it)",
    )
    parser.add_argument("--temperature-tasks", type=int, default=300, help="fresh-world tasks the choice is made on")
    parser.add_argument("--pass-at", nargs="*", type=int, default=[], help="the k of pass@k at T=1 (none: skip it)")
    parser.add_argument("--json", default="", help="also write the figures to this file")
    args = parser.parse_args()
    if any("=" not in item for item in args.policy):
        parser.error("--policy takes LABEL=DIR")
    if any(k < 1 for k in args.pass_at) or any(t < 0 for t in args.temperatures):
        parser.error("--pass-at takes k >= 1 and --temperatures values >= 0")
    if args.tasks < 0 or args.temperature_tasks < 1 or args.best_of < 1:
        parser.error("--tasks takes 0 or more; --temperature-tasks and --best-of 1 or more")
    return args


def main() -> None:
    args = arguments()
    torch.set_num_threads(1)
    policies = [Policy.load(*item.split("=", 1)) for item in args.policy]
    start = policies[0]
    scorer = None
    if args.reward_model:
        from rewardmodel.scoring import RewardScorer  # the reward model's stack: only with --reward-model

        scorer = RewardScorer(args.reward_model)

    report: dict = {}
    choice = None
    if args.temperatures:  # fixed before any held-out world is played
        choice = report["temperature_choice"] = choose_temperature(start, args.temperatures, args.temperature_tasks)
        print(json.dumps({"temperature_choice": choice}, default=str), flush=True)
    for seed in args.worlds:
        runner, tasks = unseen_world_tasks(seed, args.split, args.tasks)
        rows, played = play_policies(policies, runner, tasks, seed)
        world = report[str(seed)] = {"tasks": len(tasks), "policies": rows}
        if choice is not None:
            world["best_temperature"] = best_temperature_row(start, runner, tasks, choice, played, seed)
        if args.pass_at:
            for policy in policies:
                rows[policy.label]["pass_at_k"] = pass_at_k_cells(policy, runner, tasks, args.pass_at, seed=seed)
        if scorer is not None:
            world["best_of_n"], world["reward_model"] = reward_model_figures(
                scorer, start, runner, tasks, args.best_of, seed
            )
        print(json.dumps({"world": seed, **world}, default=str), flush=True)

    if choice is not None:
        print_temperature_choice(choice)
    for seed in args.worlds:
        print_world(seed, report[str(seed)])
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2, default=str))


if __name__ == "__main__":
    main()
