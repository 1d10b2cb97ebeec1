"""A correction replayed in its task's environment (annotate/services/corrections.py asks).

The steps before the correction are played again (the original's thoughts and calls, in order)
and must meet the same observations the original recorded: an environment that answers
otherwise now (another world, a changed server) cannot stand in for the original's, and the
correction is then stored as edited, with the reason. Then the person's calls run, each with
its real observation, then the answer (through the environment's `answer` tool), and the
rubric scores the episode. A worker's job (training/tasks.py: the web process never starts an
environment), and the simulated annotators' corrections in the loop.
"""

from __future__ import annotations

from annotate.services.corrections import Replayed
from training.envs.base import INVALID_TOOL, EpisodeRunner, Limits
from training.envs.services import environment_get, environment_tasks

# A correction may take as many calls as the person needs; a repeated call is theirs to judge.
LIMITS = Limits(max_steps=10_000, loop_repeats=10_000)


class EnvironmentReplayer:
    def _env(self, task):
        if not task.environment:
            return None, "the task names no environment"
        try:
            return environment_get(task.environment), ""
        except Exception as exc:  # noqa: BLE001 - an unknown or broken environment: say why, store as edited
            return None, f"environment {task.environment!r} is not available here ({exc})"

    def replay(self, task, prefix: list[dict], calls, answer: str) -> Replayed | str:
        """The corrected episode, or why it could not be played (a sentence)."""
        env, why = self._env(task)
        if env is None:
            return why
        found = [
            t
            for split in (task.split, "train", "dev", "eval")
            for t in environment_tasks(env, split, task_ids=[task.external_id])
        ]
        if not found:
            return f"{task.external_id!r} is not a task of environment {env.name!r}"
        runner = EpisodeRunner(env, LIMITS)
        episode = runner.start(found[0])
        for i, step in enumerate(prefix):
            kind = step.get("kind") if isinstance(step, dict) else None
            if kind == "thought":
                episode.think(str(step.get("text", "")))
            elif kind == "action":
                arguments = step.get("arguments")
                seen = _observation_of(step, prefix[i + 1 :])
                recorded = str(seen.get("content", "")) if seen is not None else None
                if step.get("tool") == INVALID_TOOL:  # a turn that was no call: refused as it was then
                    text = arguments.get("text", "") if isinstance(arguments, dict) else str(arguments)
                    problem = (recorded or "Error: not a tool call").removeprefix("Error: ")
                    episode.refuse(str(text), problem, call_id=step.get("call_id"))
                    continue
                result = episode.call(str(step.get("tool")), arguments, call_id=step.get("call_id"))
                if recorded is not None and recorded != result.content:
                    return f"the environment answers step {i} differently from when the trajectory was recorded"
                if episode.done:
                    return f"the original's episode ended at step {i}, before the correction"
        for call in calls:
            if episode.done:
                break
            episode.call(call.tool, call.arguments)
        if not episode.done and answer and "answer" in runner.tools:
            episode.call("answer", {"text": answer})
        record = episode.record
        return Replayed(steps=list(record.steps), answer=record.answer or "", outcome=episode.outcome().as_dict())


def _observation_of(action: dict, following: list) -> dict | None:
    """The observation recorded for a call: the one with its call id (a turn of two calls records
    both calls, then both results), else the next observation."""
    observations = [s for s in following if isinstance(s, dict) and s.get("kind") == "observation"]
    call_id = action.get("call_id")
    if call_id:
        tied = next((s for s in observations if s.get("call_id") == call_id), None)
        if tied is not None:
            return tied
    return observations[0] if observations else None
