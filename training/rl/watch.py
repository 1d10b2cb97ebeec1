"""What an RL or expert-iteration run watches between its steps (plain Python, no Django):
which checkpoint is the best on dev (`clearly_better`, by more than chance) and when dev
success has collapsed (`collapse`), both on dev success at the temperature the policy is
deployed at (`deployed`); over-optimization of the reward (`flag_overoptimization`); and the
echo-trap warning signs (`warn_collapse`)."""

from __future__ import annotations

import math

from core.callbacks import Callbacks
from training.evaluation.metrics import GREEDY_SUCCESS
from training.rl.config import RLConfig, deploy_words
from training.rl.dev import DEPLOY_SUCCESS


def clearly_better(candidate: dict, best: dict, margin: float) -> bool:
    """Whether a checkpoint's dev success at the deploy temperature (`deployed`) beats the best's
    by more than `margin` standard errors of the difference, and by more than one and a half
    episodes' worth, so that one lucky episode cannot decide which checkpoint is kept. Not a pool
    of sampled and greedy episodes: a sampled gain cannot outvote a greedy fall."""
    (p, n), (q, m) = deployed(candidate), deployed(best)
    spread = math.sqrt(p * (1 - p) / n + q * (1 - q) / m)
    return p - q > max(margin * spread, 1.5 / min(n, m))


def deployed(dev: dict) -> tuple[float, int]:
    """Dev success at the deploy temperature and its number of episodes (training/rl/dev.py
    `dev_figures`). Figures saved before the deploy temperature existed (a resumed run's state)
    have none: their greedy episodes stand for it (the default deploys greedy), else the sampled."""
    if DEPLOY_SUCCESS in dev:
        return dev[DEPLOY_SUCCESS], dev.get("deploy_episodes", 1)
    if GREEDY_SUCCESS in dev:
        return dev[GREEDY_SUCCESS], dev.get("greedy_episodes", 1)
    return dev["success"], dev.get("episodes", 1)


def deployed_words(dev: dict) -> str:
    """Which episodes `deployed` reads, in words: "greedy" or "T=0.7"."""
    if DEPLOY_SUCCESS in dev:
        return deploy_words(dev.get("deploy_temperature", 0.0))
    return "greedy" if GREEDY_SUCCESS in dev else deploy_words(dev.get("temperature", 1.0))


def collapse(state: dict, entry: dict, config: RLConfig) -> str | None:
    """Why the run must stop, when dev success at the deploy temperature has fallen far below the
    start's: by more than `collapse_drop` and by more than `best_margin` standard errors of the
    difference. The policy is then exploiting its reward (the short guess a reward model
    overrates, say), and more iterations only go further; the checkpoint is kept and marked,
    the best one stays."""
    start = next((e for e in state["evaluations"] if e["iteration"] == 0), None)
    if not config.collapse_drop or start is None or entry["iteration"] == 0:
        return None
    (p, n), (q, m) = deployed(start["dev"]), deployed(entry["dev"])
    spread = math.sqrt(p * (1 - p) / n + q * (1 - q) / m)
    if p - q <= max(config.collapse_drop, config.best_margin * spread):
        return None
    entry["collapse"] = entry["dev"]["collapsed"] = True  # on the checkpoint's policy too
    scores = (
        f", while the reward score went from {start['rm_score']:+.2f} to {entry['rm_score']:+.2f}"
        if entry.get("rm_score") is not None and start.get("rm_score") is not None
        else ""
    )
    best = state["best"]["iteration"] if state["best"] else 0
    rose = (
        entry.get("rm_score") is not None
        and start.get("rm_score") is not None
        and entry["rm_score"] > start["rm_score"]
    )
    why = (
        "The policy is exploiting its reward rather than improving (its score rose while dev success fell)"
        if rose
        else "Its reward score did not rise either, so this is not reward hacking: the updates moved the policy "
        "away from what it is paid for"
    )
    sampled = (
        f" (at T={entry['dev']['temperature']:g}: {entry['dev']['success']:.1%}, the start's {start['dev']['success']:.1%})"
        if "temperature" in entry["dev"] and "temperature" in start["dev"]
        else ""
    )
    return (
        f"Stopped after iteration {entry['iteration']}: {deployed_words(entry['dev'])} dev success (what is "
        f"deployed) fell to {q:.1%} from the start's {p:.1%}{sampled} (more than {config.collapse_drop:.0%} "
        f"and {config.best_margin:g} standard errors){scores}. {why}; the checkpoint of iteration "
        f"{entry['iteration']} is kept and marked as collapsed, and the best by {deployed_words(entry['dev'])} dev "
        f"success stays iteration {best}. A reward model that checks the answer (answer-branch pairs), an "
        f"ensemble, or a lower learning rate are the remedies (docs/loop.md)."
    )


def flag_overoptimization(state: dict, entry: dict, config: RLConfig, callbacks: Callbacks) -> None:
    """Over-optimization: the reward-model score rose since the best dev checkpoint while dev
    success at the deploy temperature fell by more than `overoptimization_tolerance`."""
    best = state["best"]
    if best is None or best["iteration"] == entry["iteration"]:
        return
    best_entry = next((e for e in state["evaluations"] if e["iteration"] == best["iteration"]), None)
    if best_entry is None or best_entry["rm_score"] is None or entry["rm_score"] is None:
        return
    fell = deployed(best["dev"])[0] - deployed(entry["dev"])[0]
    if entry["rm_score"] > best_entry["rm_score"] and fell > config.overoptimization_tolerance:
        entry["overoptimization"] = True
        callbacks.metrics(entry["iteration"], {"eval/overoptimization": 1.0})
        callbacks.log(
            f"Over-optimization: since iteration {best['iteration']} the reward-model score rose "
            f"({best_entry['rm_score']:+.3f} -> {entry['rm_score']:+.3f}) while {deployed_words(entry['dev'])} dev "
            f"success fell "
            f"{fell:.1%}; the best checkpoint stays the one of iteration {best['iteration']}."
        )


def warn_collapse(state: dict, figures: dict, iteration: int, callbacks: Callbacks) -> None:
    """RAGEN's "echo trap" warning signs: the spread of scores within a batch falls far below
    its first value, or the gradient norm spikes far above its running median."""
    spread = figures["objective/score_std"]
    if state["score_std_first"] is None:
        state["score_std_first"] = spread
    elif state["score_std_first"] > 0 and spread < 0.2 * state["score_std_first"]:
        callbacks.log(
            f"Warning (iteration {iteration}): the spread of scores within the batch fell to "
            f"{spread:.3f} from {state['score_std_first']:.3f}; the policy may be collapsing into one "
            f"template."
        )
    norm = figures.get("policy/grad_norm")
    if norm is None:
        return
    history = state["grad_norms"]
    if len(history) >= 5:
        median = sorted(history)[len(history) // 2]
        if median > 0 and norm > 10 * median:
            callbacks.log(
                f"Warning (iteration {iteration}): gradient norm {norm:.2f} is over 10x its median {median:.2f}."
            )
    history.append(norm)
    del history[:-50]
