"""Disagreement-first routing: how many human labels a campaign needs to reach a reward-model
accuracy, with the routing and without it (an active-learning simulation).

    .venv/bin/python benchmarks/judge_routing.py                        # the full run: 15-20 min on 2 idle cores
    .venv/bin/python benchmarks/judge_routing.py --reuse --target 0.78  # the same data again, another target
    .venv/bin/python benchmarks/judge_routing.py --tiny                 # ~15 s: CI's smoke test

The full run's defaults: all encyclopedia tasks, seeds 0 1 2, 10 random start labels, 10 more
per round up to 100, reward models of reward_model_train's SETTINGS trained for at least 40
steps each: 19 reward models per seed (~10 s each) and a scoring of the ~2,800-comparison pool
before each routed round.

Data: reward_model_train.py's (`prepare`, the same scratch database, `--database`, dropped and
re-created unless `--reuse`): scripted trajectories on the encyclopedia's tasks (`--tasks` per
split), six comparisons per task, a snapshot split by task 80/20. Its labels are not used:
the train split's comparisons (ties included) are the pool people label from, each with the
rubric outcomes of its two sides; the test split's comparisons whose two rubric utilities
differ are the held-out pairs. Accuracy = the share of held-out pairs where the reward model
scores the side with the higher rubric utility higher (equal scores count half).

A label is one simulated vote (`AnnotatorProfile(temperature=1.0, flip=0.1)`, correctness first,
as reward_model_train's annotators), drawn once per seed and comparison so that both arms
get the same vote for the same comparison. A vote that comes out a tie is a label spent (a
person spent the time) that gives no training pair.

Per seed, two arms share everything but the order: the same `--start` random comparisons
labeled first, the same first reward model, the same training seeds and settings per round.
Each round trains a reward model on the arm's labeled pairs (reward_model_train's SETTINGS,
`rewardmodel.train.train_reward_model`, Django-free, at least `--min-steps` optimizer steps so
that a few dozen pairs are not 5 steps of training), measures held-out accuracy, then labels
`--batch` more: `random` at random; `disagreement` the highest
`annotate.routing.disagreement_priority` given the current model's direction and
p = sigmoid(score_A - score_B) on every unlabeled pool comparison (ties broken at random). With
the reward model the only judge there is no second judge to disagree with and no probe, so
what this measures is the routing's "the reward model is unsure" term: uncertainty sampling.

Reported, per arm and label count: the mean accuracy over seeds with a 95% t interval, and
the paired difference (disagreement - random, same seed); the labels each seed needed to
reach `--target` (default 90%: the start's accuracy plus 90% of the random arm's mean gain
from the start to the full budget; or an absolute accuracy; or `0.9x`, 0.9 times the random
arm's mean accuracy at the full budget, which can lie below what the start labels alone
reach: it did in a trial), their mean, and the saving 1 - labels(disagreement) / labels(random) (a target not
reached is reported as not reached, with no number); and what each arm spent its labels on after
the start: ties (wasted), pairs whose rubric utilities are equal, votes against the rubric
(noise), pairs with exactly one correct side, and how many distinct tasks a batch spans. A markdown table on stdout, everything in JSON
(`--out`, else results.json in the scratch database's storage folder, var/bench-NAME/judge_routing/).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from annotate.preferences import aggregate
from annotate.routing import JudgedComparison, disagreement_priority
from benchmarks._common import add_database_argument, bench_env, ensure_bench_database, parse_setting
from benchmarks.reward_model_train import SETTINGS, prepare
from training.simulated_annotators import AnnotatorProfile, simulated_choice

ROOT = Path(__file__).resolve().parent.parent

PROFILE = AnnotatorProfile(temperature=1.0, flip=0.1)  # reward_model_train's annotators
ARMS = ("random", "disagreement")
TIE = 3  # the middle of the 5-point scale
# The reward model here learns what it can within ~60 random labels (0.74 held-out at 20, 0.80
# at 60 in a trial; reward_model_train's curve is flat from 250 to 2,000 pairs), so the budget
# covers that climb finely rather than the plateau.
FULL = {"tasks": 1000, "seeds": [0, 1, 2], "start": 10, "batch": 10, "budget": 100, "min_steps": 40}
TINY = {"tasks": 6, "seeds": [0], "start": 8, "batch": 8, "budget": 16, "min_steps": 4}
TINY_SETTINGS = {"epochs": 1.0, "hidden": 32, "layers": 1, "heads": 2, "max_length": 256}


def work_dir(env: dict) -> Path:
    return Path(env["ARBITER_VAR_DIR"]) / "judge_routing"


# --- data (a child process with Django) ----------------------------------------------------


def prepare_pool(env: dict, n_tasks: int) -> dict:
    """reward_model_train's data, then every comparison of its snapshot (ties included) with
    both sides' messages and rubric outcomes, written to one JSON file."""
    info = prepare(env, n_tasks)  # sets Django up
    from annotate.exports import iter_rows
    from annotate.models import Comparison, DatasetSnapshot

    snapshot = DatasetSnapshot.objects.get(pk=info["snapshot_id"])
    rows = list(iter_rows(snapshot, "trl"))
    sides = {
        pk: (a, b, oa or {}, ob or {})
        for pk, a, b, oa, ob in Comparison.objects.filter(pk__in=[r["comparison_id"] for r in rows]).values_list(
            "pk", "trajectory_a_id", "trajectory_b_id", "trajectory_a__outcome", "trajectory_b__outcome"
        )
    }
    trajectories, comparisons = {}, {"train": [], "test": []}
    for row in rows:
        a, b, outcome_a, outcome_b = sides[row["comparison_id"]]
        a, b = str(a), str(b)  # JSON object keys are strings
        # The export orders the sides by its own label; back to A and B.
        messages_a, messages_b = (
            (row["rejected"], row["chosen"]) if row["preferred"] == "B" else (row["chosen"], row["rejected"])
        )
        trajectories[a] = {"prompt": row["prompt"], "messages": messages_a, "outcome": outcome_a}
        trajectories[b] = {"prompt": row["prompt"], "messages": messages_b, "outcome": outcome_b}
        comparisons[row["split"]].append({"id": row["comparison_id"], "task": row["task_id"], "a": a, "b": b})
    path = work_dir(env) / "data.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"trajectories": trajectories, "comparisons": comparisons}))
    return {**info, "data": str(path)}


def _child(*args: str, env: dict) -> dict:
    out = subprocess.run([sys.executable, __file__, *args], cwd=ROOT, env=env, capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(f"{args[0]} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


# --- the simulation (this process, no Django) ----------------------------------------------


def vote(comparison: dict, trajectories: dict, seed: int) -> int:
    """One simulated person's choice (1 A much better .. 5 B much better), the same in both arms."""
    rng = random.Random(f"vote:{seed}:{comparison['id']}")
    a = PROFILE.utility(trajectories[comparison["a"]]["outcome"])
    b = PROFILE.utility(trajectories[comparison["b"]]["outcome"])
    return simulated_choice(utility_a=a, utility_b=b, left_is_a=rng.random() < 0.5, profile=PROFILE, rng=rng)


def rubric(trajectories: dict, key: str) -> float:
    return trajectories[key]["outcome"]["utility"]


def label_points(start: int, batch: int, budget: int, pool: int) -> list[int]:
    """The label counts at which a reward model is trained and measured."""
    last = min(budget, pool)
    points = [min(start, last)]
    while points[-1] < last:
        points.append(min(points[-1] + batch, last))
    return points


class Lab:
    """Trains and scores the reward models of one run: the data, the settings, a text cache."""

    def __init__(self, data: dict, tokenizer_dir: str, settings: dict, min_steps: int, work: Path):
        self.trajectories = data["trajectories"]
        self.pool = {c["id"]: c for c in data["comparisons"]["train"]}
        self.heldout = [
            c
            for c in data["comparisons"]["test"]
            if rubric(self.trajectories, c["a"]) != rubric(self.trajectories, c["b"])
        ]
        self.tokenizer_dir, self.settings, self.min_steps, self.work = tokenizer_dir, settings, min_steps, work
        self.texts: dict[str, str] = {}  # trajectory -> serialized text (the same for every model here)
        self.seconds = {"train": 0.0, "score": 0.0}

    def train(self, labeled: list[int], votes: dict[int, int], seed: int, name: str) -> dict:
        """A reward model on the labeled comparisons (ties give no pair); its directory and figures."""
        from rewardmodel.train import RewardModelConfig, train_reward_model

        rows = []
        for cid in labeled:
            pref = aggregate([votes[cid]], "majority")  # the snapshot's rule, as reward_model_train's export
            if pref.preferred == "tie":
                continue
            c = self.pool[cid]
            chosen, rejected = (c["b"], c["a"]) if pref.preferred == "B" else (c["a"], c["b"])
            rows.append(
                {
                    "prompt": self.trajectories[chosen]["prompt"],
                    "chosen": self.trajectories[chosen]["messages"],
                    "rejected": self.trajectories[rejected]["messages"],
                    "margin": pref.margin,
                    "preferred": pref.preferred,
                }
            )
        if not rows:
            return {"model_dir": None, "pairs": 0, "steps": 0, "seconds": 0.0}
        steps_per_epoch = math.ceil(len(rows) / self.settings["batch_size"])
        epochs = max(self.settings["epochs"], self.min_steps / steps_per_epoch)
        config = RewardModelConfig(
            tokenizer_dir=self.tokenizer_dir, seed=seed, checkpoint_every=0, **{**self.settings, "epochs": epochs}
        )
        result = train_reward_model(rows, config, self.work / name)
        self.seconds["train"] += result.seconds
        return {"model_dir": result.model_dir, "pairs": len(rows), "steps": result.steps, "seconds": result.seconds}

    def scores(self, model_dir: str, keys: set[str]) -> dict[str, float]:
        """The model's score of each trajectory in `keys` (each trajectory scored once)."""
        from rewardmodel.scoring import RewardScorer
        from rewardmodel.serialize import pair_text

        started = time.monotonic()
        scorer = RewardScorer(model_dir)
        keys = sorted(keys)
        for key in keys:
            if key not in self.texts:
                t = self.trajectories[key]
                self.texts[key] = pair_text(
                    t["prompt"], t["messages"], scorer.tokenizer, scorer.text_tokens, scorer.view
                )
        scores = dict(zip(keys, scorer.score_texts([self.texts[k] for k in keys]), strict=True))
        self.seconds["score"] += time.monotonic() - started
        return scores

    def accuracy(self, model_dir: str | None) -> float | None:
        if model_dir is None:
            return None
        s = self.scores(model_dir, {k for c in self.heldout for k in (c["a"], c["b"])})
        right = 0.0
        for c in self.heldout:
            better, worse = (
                (c["a"], c["b"])
                if rubric(self.trajectories, c["a"]) > rubric(self.trajectories, c["b"])
                else (c["b"], c["a"])
            )
            right += 1.0 if s[better] > s[worse] else 0.5 if s[better] == s[worse] else 0.0
        return right / len(self.heldout)

    def route(self, model_dir: str | None, unlabeled: list[int], k: int, rng: random.Random) -> list[tuple[int, float]]:
        """The k unlabeled comparisons the routing offers first, with their priorities."""
        if model_dir is None:  # no model yet (every label a tie): nothing is judged, all equal
            priority = {cid: disagreement_priority(None) for cid in unlabeled}
        else:
            s = self.scores(model_dir, {key for cid in unlabeled for key in (self.pool[cid]["a"], self.pool[cid]["b"])})
            priority = {}
            for cid in unlabeled:
                c = self.pool[cid]
                p = 1 / (1 + math.exp(-max(-60.0, min(60.0, s[c["a"]] - s[c["b"]]))))  # P(A is better)
                direction = -1 if p > 0.5 else 1 if p < 0.5 else 0
                priority[cid] = disagreement_priority(JudgedComparison(directions=[direction], probabilities=[p]))
        tiebreak = {cid: rng.random() for cid in unlabeled}
        chosen = sorted(unlabeled, key=lambda cid: (-priority[cid], tiebreak[cid]))[:k]
        return [(cid, priority[cid]) for cid in chosen]


def run_seed(lab: Lab, seed: int, points: list[int]) -> tuple[list[dict], list[dict]]:
    """Both arms of one seed: (curve points, the labels each arm chose after the start)."""
    votes = {cid: vote(c, lab.trajectories, seed) for cid, c in lab.pool.items()}
    pool = sorted(lab.pool)
    start = random.Random(f"start:{seed}").sample(pool, points[0])
    curve, picks = [], []

    def measure(arm: str, labeled: list[int], round_: int, trained: dict | None = None) -> dict:
        if trained is None:  # (the start's model is trained once, for both arms)
            trained = lab.train(labeled, votes, seed * 1000 + round_, f"s{seed}-{arm}-{len(labeled)}")
        if "accuracy" not in trained:
            trained["accuracy"] = lab.accuracy(trained["model_dir"])
        acc = trained["accuracy"]
        point = {"seed": seed, "arm": arm, "labels": len(labeled), **trained}
        curve.append({k: v for k, v in point.items() if k != "model_dir"})
        shown = "n/a (no pair that is not a tie)" if acc is None else f"{acc:.3f}"
        print(
            f"seed {seed} {arm:12s} {len(labeled):4d} labels ({trained['pairs']} pairs, {trained['steps']} steps, "
            f"{trained['seconds']:.0f} s): held-out accuracy {shown}",
            flush=True,
        )
        return trained

    first = lab.train(start, votes, seed * 1000, f"s{seed}-start")
    for arm in ARMS:
        rng = random.Random(f"{arm}:{seed}")
        labeled = list(start)
        model = measure(arm, labeled, 0, trained=first)
        for round_, n in enumerate(points[1:], start=1):
            unlabeled = sorted(set(pool) - set(labeled))
            if arm == "random":
                chosen = [(cid, None) for cid in rng.sample(unlabeled, n - len(labeled))]
            else:
                chosen = lab.route(model["model_dir"], unlabeled, n - len(labeled), rng)
            for cid, priority in chosen:
                picks.append(
                    {
                        "seed": seed,
                        "arm": arm,
                        "round": round_,
                        "comparison": cid,
                        "vote": votes[cid],
                        "priority": priority,
                    }
                )
            labeled += [cid for cid, _ in chosen]
            if model is not first and model["model_dir"]:
                shutil.rmtree(Path(model["model_dir"]).parent, ignore_errors=True)
            model = measure(arm, labeled, round_)
        if model is not first and model["model_dir"]:
            shutil.rmtree(Path(model["model_dir"]).parent, ignore_errors=True)
    if first["model_dir"]:
        shutil.rmtree(Path(first["model_dir"]).parent, ignore_errors=True)
    return curve, picks


# --- figures --------------------------------------------------------------------------------


def mean_interval(values: list[float]) -> dict:
    """Mean over seeds with a 95% t interval (none from one seed)."""
    n = len(values)
    if n == 0:
        return {"mean": None, "ci": None, "n": 0}
    mean = statistics.fmean(values)
    if n < 2:
        return {"mean": mean, "ci": None, "n": n}
    from scipy.stats import t

    half = t.ppf(0.975, n - 1) * statistics.stdev(values) / math.sqrt(n)
    return {"mean": mean, "ci": [mean - half, mean + half], "n": n}


def target_accuracy(spec: str, random_curve: list[dict]) -> tuple[float | None, str]:
    """The accuracy `--target` names (None when the random arm has no figure to take it from), and in words."""
    first, last = random_curve[0], random_curve[-1]
    if spec.endswith("%"):
        share = float(spec[:-1]) / 100
        words = (
            f"the start's accuracy + {spec} of the random arm's mean gain from {first['labels']} to "
            f"{last['labels']} labels"
        )
        if first["mean"] is None or last["mean"] is None:
            return None, words
        return first["mean"] + share * (last["mean"] - first["mean"]), words
    if spec.endswith("x"):
        words = f"{spec[:-1]} x the random arm's mean accuracy at {last['labels']} labels"
        return (None if last["mean"] is None else float(spec[:-1]) * last["mean"]), words
    return float(spec), "absolute"


def parse_target(text: str) -> str:
    """`--target` checked at the edge: 0.75, 0.9x or 90%."""
    try:
        float(text[:-1] if text[-1:] in ("%", "x") else text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r}: give an accuracy (0.75), a multiple (0.9x) or a share (90%)"
        ) from None
    return text


def labels_to_reach(curve: list[dict], target: float) -> int | None:
    """The first measured label count whose accuracy is at least the target (None: never)."""
    for point in sorted(curve, key=lambda p: p["labels"]):
        if point["accuracy"] is not None and point["accuracy"] >= target:
            return point["labels"]
    return None


def spent(picks: list[dict], lab: Lab) -> dict:
    """What the labels after the start went to (shares of them)."""
    n = len(picks)
    if not n:
        return {"labels": 0}
    traj = lab.trajectories
    ties = against = equal = one_correct = 0
    for pick in picks:
        c = lab.pool[pick["comparison"]]
        ua, ub = rubric(traj, c["a"]), rubric(traj, c["b"])
        equal += ua == ub
        one_correct += bool(traj[c["a"]]["outcome"].get("correct")) != bool(traj[c["b"]]["outcome"].get("correct"))
        if pick["vote"] == TIE:
            ties += 1
        elif ua != ub and (pick["vote"] < TIE) != (ua > ub):
            against += 1
    batches: dict[tuple, list] = {}
    for pick in picks:
        if "round" in pick:
            batches.setdefault((pick["seed"], pick["arm"], pick["round"]), []).append(
                lab.pool[pick["comparison"]]["task"]
            )
    return {
        "labels": n,
        "ties": ties / n,
        "equal_rubric_utility": equal / n,
        "against_rubric": against / n,
        "one_correct_side": one_correct / n,
        # Routing can fill a batch with one task's comparisons (the model unsure about that task):
        "distinct_tasks_per_batch": (
            statistics.fmean(len(set(tasks)) / len(tasks) for tasks in batches.values()) if batches else None
        ),
    }


def pool_rates(lab: Lab, seeds: list[int]) -> dict:
    """The same shares over the whole pool: what random labeling spends on average."""
    picks = [
        {"comparison": cid, "vote": vote(c, lab.trajectories, seed)} for seed in seeds for cid, c in lab.pool.items()
    ]
    return spent(picks, lab)


def vote_ceiling(lab: Lab) -> float:
    """Expected share of single votes that pick the higher-rubric side of a held-out pair (a tie
    counts half): how far one person's label itself agrees with the truth."""
    total = 0.0
    for c in lab.heldout:
        oa, ob = lab.trajectories[c["a"]]["outcome"], lab.trajectories[c["b"]]["outcome"]
        gap = PROFILE.utility(oa) - PROFILE.utility(ob)
        if gap == 0:
            total += 0.5
            continue
        bt = 1 / (1 + math.exp(-max(-60.0, min(60.0, gap / PROFILE.temperature))))
        p_a = (1 - PROFILE.flip) * bt + PROFILE.flip * (1 - bt)
        total += p_a if oa["utility"] > ob["utility"] else 1 - p_a
    return total / len(lab.heldout)


def summarize(curve: list[dict], picks: list[dict], lab: Lab, seeds: list[int], target_spec: str, budget: int) -> dict:
    points = sorted({p["labels"] for p in curve})
    arms = {}
    for arm in ARMS:
        rows = []
        for n in points:
            accs = [p["accuracy"] for p in curve if p["arm"] == arm and p["labels"] == n and p["accuracy"] is not None]
            rows.append({"labels": n, **mean_interval(accs), "per_seed": accs})
        arms[arm] = {"curve": rows, "spent": spent([p for p in picks if p["arm"] == arm], lab)}
    difference = []
    for n in points:
        by_seed = {
            p["seed"]: p["accuracy"]
            for p in curve
            if p["labels"] == n and p["arm"] == "random" and p["accuracy"] is not None
        }
        diffs = [
            p["accuracy"] - by_seed[p["seed"]]
            for p in curve
            if p["labels"] == n and p["arm"] == "disagreement" and p["accuracy"] is not None and p["seed"] in by_seed
        ]
        difference.append({"labels": n, **mean_interval(diffs), "per_seed": diffs})
    target, target_text = target_accuracy(target_spec, arms["random"]["curve"])
    needed = {}
    for arm in ARMS:
        per_seed = {}
        for seed in seeds:
            own = [p for p in curve if p["arm"] == arm and p["seed"] == seed]
            per_seed[seed] = None if target is None else labels_to_reach(own, target)
        reached = [v for v in per_seed.values() if v is not None]
        needed[arm] = {
            "per_seed": per_seed,
            "reached": len(reached),
            # A mean only when every seed got there: one that did not has no count to average.
            "mean": statistics.fmean(reached) if reached and len(reached) == len(seeds) else None,
        }
    saving = {"per_seed": {}, "mean": None, "note": ""}
    for seed in seeds:
        r, d = needed["random"]["per_seed"][seed], needed["disagreement"]["per_seed"][seed]
        saving["per_seed"][seed] = None if r is None or d is None else 1 - d / r
    if needed["random"]["mean"] is not None and needed["disagreement"]["mean"] is not None:
        saving["mean"] = 1 - needed["disagreement"]["mean"] / needed["random"]["mean"]
        if needed["random"]["mean"] == needed["disagreement"]["mean"] == points[0]:
            saving["note"] = "both arms reach the target with the start labels alone: the target cannot tell them apart"
    else:
        missing = [
            f"{arm} ({needed[arm]['reached']} of {len(seeds)} seeds)" for arm in ARMS if needed[arm]["mean"] is None
        ]
        saving["note"] = f"target not reached within {budget} labels by: {', '.join(missing)}; no saving to report"
    return {
        "target": {"spec": target_spec, "accuracy": target, "meaning": target_text},
        "arms": arms,
        "difference": difference,
        "labels_to_target": needed,
        "saving": saving,
    }


def _fmt(stat: dict) -> str:
    if stat["mean"] is None:
        return "n/a"
    if stat["ci"] is None:
        return f"{stat['mean']:.3f}"
    return f"{stat['mean']:.3f} ({stat['ci'][0]:.3f} to {stat['ci'][1]:.3f})"


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.0f}%"


def print_tables(summary: dict, pool: dict, seeds: list[int]) -> None:
    print()
    print(
        "| labels | random: held-out accuracy (95% t interval over seeds) | disagreement-first | difference, same seed |"
    )
    print("|---|---|---|---|")
    for rnd, dis, diff in zip(
        summary["arms"]["random"]["curve"], summary["arms"]["disagreement"]["curve"], summary["difference"], strict=True
    ):
        print(f"| {rnd['labels']} | {_fmt(rnd)} | {_fmt(dis)} | {_fmt(diff)} |")
    target = summary["target"]
    shown = "n/a" if target["accuracy"] is None else f"{target['accuracy']:.3f}"
    print()
    print(f"target accuracy {shown} ({target['meaning']})")
    print()
    print(
        "| arm | labels to reach the target, per seed | mean | labels after the start: ties (no pair) | "
        "equal rubric utility | vote against the rubric | one correct side | distinct tasks per batch |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for arm in ARMS:
        need = summary["labels_to_target"][arm]
        per_seed = " ".join(f"{'not reached' if v is None else v}" for v in need["per_seed"].values())
        mean = "n/a" if need["mean"] is None else f"{need['mean']:.0f}"
        s = summary["arms"][arm]["spent"]
        print(
            f"| {arm} | {per_seed} | {mean} | {_pct(s.get('ties'))} | {_pct(s.get('equal_rubric_utility'))} | "
            f"{_pct(s.get('against_rubric'))} | {_pct(s.get('one_correct_side'))} | "
            f"{_pct(s.get('distinct_tasks_per_batch'))} |"
        )
    print(
        f"| (whole pool) | | | {_pct(pool.get('ties'))} | {_pct(pool.get('equal_rubric_utility'))} | "
        f"{_pct(pool.get('against_rubric'))} | {_pct(pool.get('one_correct_side'))} | |"
    )
    saving = summary["saving"]
    print()
    if saving["mean"] is not None:
        per_seed = ", ".join(
            f"seed {s}: {'n/a' if v is None else f'{100 * v:.0f}%'}" for s, v in saving["per_seed"].items()
        )
        print(
            f"saving (1 - labels disagreement / labels random, means over seeds): {100 * saving['mean']:.0f}% ({per_seed})"
        )
    if saving["note"]:
        print(f"note: {saving['note']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help=f"CI size: {TINY}, a tiny model {TINY_SETTINGS}")
    parser.add_argument("--tasks", type=int, help=f"encyclopedia tasks per split (default {FULL['tasks']}: all)")
    parser.add_argument("--seeds", type=int, nargs="+", help=f"default {FULL['seeds']}")
    parser.add_argument("--start", type=int, help=f"random labels both arms start from (default {FULL['start']})")
    parser.add_argument("--batch", type=int, help=f"labels added per round (default {FULL['batch']})")
    parser.add_argument("--budget", type=int, help=f"labels in all, per arm and seed (default {FULL['budget']})")
    parser.add_argument(
        "--min-steps",
        type=int,
        help=f"optimizer steps each reward model takes at least: epochs are raised to reach them "
        f"(default {FULL['min_steps']})",
    )
    parser.add_argument(
        "--target",
        default="90%",
        type=parse_target,
        help="accuracy to reach: a number (0.75); 0.9x: 0.9 times the random arm's mean accuracy at the full budget; "
        "or 90%%: the start's accuracy plus 90%% of the random arm's mean gain from the start to the full budget "
        "(default 90%%: 0.9x can lie below what the start labels alone reach)",
    )
    parser.add_argument("--threads", type=int, default=2, help="torch threads (default 2: the machine's 2 cores)")
    parser.add_argument(
        "--set", nargs="*", default=[], metavar="FIELD=VALUE", help=f"reward-model settings over {SETTINGS}"
    )
    parser.add_argument("--out", help="JSON results file (default: results.json in the scratch storage folder)")
    parser.add_argument(
        "--reuse", action="store_true", help="reuse the data of the previous invocation (the database is then kept)"
    )
    add_database_argument(parser)
    args = parser.parse_args()
    size = {**FULL, **(TINY if args.tiny else {})}
    for key in size:
        if getattr(args, key) is None:
            setattr(args, key, size[key])
    if min(args.start, args.batch, args.budget, args.tasks) < 1 or args.start > args.budget:
        parser.error("--tasks, --start, --batch and --budget must be at least 1, and --start at most --budget")
    settings = {**SETTINGS, **(TINY_SETTINGS if args.tiny else {})}
    settings.update({k: parse_setting(v) for k, v in (kv.split("=", 1) for kv in args.set)})

    started = time.monotonic()
    env = bench_env(args.database)
    work = work_dir(env)
    info_path = work / "info.json"
    if args.reuse and info_path.exists():
        info = json.loads(info_path.read_text())
    else:
        env = ensure_bench_database(args.database)
        info = {**_child("_prepare", str(args.tasks), env=env), "tasks": args.tasks}
        info_path.write_text(json.dumps(info))
    if info.get("tasks", args.tasks) != args.tasks:
        print(f"--reuse: the data was built with --tasks {info['tasks']}, not {args.tasks}", flush=True)
        args.tasks = info["tasks"]

    import torch
    from transformers.utils import logging as hf_logging

    torch.set_num_threads(args.threads)
    hf_logging.disable_progress_bar()  # a "Loading weights" bar per scored model otherwise
    lab = Lab(json.loads(Path(info["data"]).read_text()), info["tokenizer"], settings, args.min_steps, work / "models")
    if not lab.heldout:
        raise SystemExit("no held-out pair with two different rubric utilities: use more --tasks")
    points = label_points(args.start, args.batch, args.budget, len(lab.pool))
    pool = pool_rates(lab, args.seeds)
    ceiling = vote_ceiling(lab)
    print(
        f"data: a pool of {len(lab.pool)} comparisons ({_pct(pool['ties'])} would be voted a tie), "
        f"{len(lab.heldout)} held-out pairs; one vote picks the higher-rubric side of a held-out pair "
        f"{ceiling:.3f} of the time (built in {info['seconds']} s)",
        flush=True,
    )
    print(f"labels measured at {points}; seeds {args.seeds}; reward model {settings}, at least {args.min_steps} steps")
    curve, picks = [], []
    for seed in args.seeds:
        c, p = run_seed(lab, seed, points)
        curve += c
        picks += p
    summary = summarize(curve, picks, lab, args.seeds, args.target, points[-1])
    print_tables(summary, pool, args.seeds)
    out = Path(args.out) if args.out else work / "results.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    result = {
        "config": {
            **{k: getattr(args, k) for k in FULL},
            "tiny": args.tiny,
            "threads": args.threads,
            "settings": settings,
            "profile": {
                "temperature": PROFILE.temperature,
                "flip": PROFILE.flip,
                "correct_first": PROFILE.correct_first,
            },
        },
        "data": {
            "pool": len(lab.pool),
            "heldout": len(lab.heldout),
            "vote_agrees_with_rubric": ceiling,
            "pool_rates": pool,
        },
        **summary,
        "runs": curve,
        "picks": picks,
        "seconds": round(time.monotonic() - started, 1),
        "seconds_training": round(lab.seconds["train"], 1),
        "seconds_scoring": round(lab.seconds["score"], 1),
    }
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(
        f"\nwrote {out} ({result['seconds']} s in all: training {result['seconds_training']} s, "
        f"scoring {result['seconds_scoring']} s)"
    )


if __name__ == "__main__":
    # The child: the parent passes the scratch database's environment.
    if len(sys.argv) > 1 and sys.argv[1] == "_prepare":
        print(json.dumps(prepare_pool(dict(os.environ), int(sys.argv[2]))))
    else:
        main()
