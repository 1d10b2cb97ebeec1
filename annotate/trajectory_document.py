"""A stored trajectory written back as canonical JSON (`arbiter.trajectory/v1`), the format an
import reads (docs/formats/canonical.md): GET /api/v1/trajectories/<id>/.

What an import stored comes back as it was sent: the task (its id, prompt, environment,
reference answer, split and metadata), the agent, the steps, the answer, the outcome and the
metadata. Keys an import would have filled with a default are written only when they hold
something (an empty environment, reference answer or version; no outcome; empty metadata), so
a complete canonical input reads back equal, and any read-back document imports again as the
same trajectory (the same content hash: a duplicate, never a second row).
"""

from __future__ import annotations

from typing import Any

from annotate.models import Trajectory
from annotate.trajectory_formats import SCHEMA_V1


def trajectory_get(*, trajectory_id: int) -> Trajectory | None:
    """The trajectory with its task and agent, or None."""
    return Trajectory.objects.select_related("task", "policy").filter(pk=trajectory_id).first()


def trajectory_document(*, trajectory: Trajectory) -> dict[str, Any]:
    """`trajectory` in canonical JSON; it validates against the v1 schema."""
    task, policy = trajectory.task, trajectory.policy
    task_doc: dict[str, Any] = {"external_id": task.external_id, "prompt": task.prompt}
    if task.environment:
        task_doc["environment"] = task.environment
    if task.reference_answer:
        task_doc["reference_answer"] = task.reference_answer
    task_doc["split"] = task.split
    if task.metadata:
        task_doc["metadata"] = task.metadata
    agent = {"name": policy.name, **({"version": policy.version} if policy.version else {})}
    document: dict[str, Any] = {
        "schema": trajectory.schema_version or SCHEMA_V1,
        "task": task_doc,
        "agent": agent,
        "steps": trajectory.steps,
        "answer": trajectory.answer,
    }
    if trajectory.outcome is not None:
        document["outcome"] = trajectory.outcome
    if trajectory.metadata:
        document["metadata"] = trajectory.metadata
    return document
