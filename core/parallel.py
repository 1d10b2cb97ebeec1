"""Data-parallel training in several processes: launched by the worker, watched, stopped, cleaned up.

A run whose config asks for `processes` N > 1 trains in N processes of
`torch.distributed.run` (the launcher `accelerate launch` uses for several GPUs), one per GPU
on a GPU worker (NCCL) or N CPU processes (gloo). Each process trains on its share of every
batch: behaviour cloning and RL through core/ranks.py (gradients summed over the whole
batch's loss), the reward model through TRL's trainer (accelerate averages its gradients).

The worker's process (the parent) and the ranks talk through files in the run's work folder:

    spec.json       what to train (written by the parent): JSON, the config as its fields,
                    the data in JSON Lines files it names (`write_rows`, `read_rows`)
    events.jsonl    progress, metrics, log lines and checkpoints, written by rank 0, read and
                    forwarded to the run's callbacks by the parent as they come
    STOP            made by the parent when the run is cancelled; every rank checks it after
                    each step and they agree (an all-reduce) to stop at the same step
    result.json     rank 0's result, when it ends

No process outlives its run: the launcher runs in a session of its own, is sent SIGTERM
when its parent dies (Linux's parent-death signal), and each rank gets SIGKILL when the
launcher dies; a cancelled or failed run's process group is terminated, then killed.

Multi-node (several machines) runs are launched by hand with `accelerate launch` on each
machine (docs/runs.md); this module launches the processes of one machine.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

SPEC, EVENTS, STOP, RESULT = "spec.json", "events.jsonl", "STOP", "result.json"
_PR_SET_PDEATHSIG = 1


class ParallelRunFailed(RuntimeError):
    """The processes of a data-parallel run ended without a result."""


def _die_with_parent(sig: int) -> None:
    """Linux: this process gets `sig` when the one that started it ends (harmless elsewhere)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, sig)
    except (OSError, AttributeError):
        pass


def in_rank() -> bool:
    """True inside a process that `launch` started (one rank of a data-parallel run)."""
    return "ARBITER_PARALLEL_DIR" in os.environ


def rank() -> int:
    return int(os.environ.get("RANK", "0"))


def world_size() -> int:
    return int(os.environ.get("WORLD_SIZE", "1"))


def rank_setup() -> Path:
    """In a rank, first thing: die with the launcher, and use this rank's share of the CPU
    threads. Returns the run's work folder."""
    import torch

    _die_with_parent(signal.SIGKILL)
    local = max(1, int(os.environ.get("LOCAL_WORLD_SIZE", "1")))
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // local))
    return Path(os.environ["ARBITER_PARALLEL_DIR"])


def rank_init(device: str):
    """In a rank, after rank_setup: this rank's device (its own GPU, by LOCAL_RANK, on a GPU
    worker) and the process group (NCCL on GPUs, gloo on CPUs). Returns the device."""
    import torch
    import torch.distributed as dist

    chosen = torch.device(device)
    if chosen.type == "cuda":
        chosen = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        torch.cuda.set_device(chosen)
    dist.init_process_group("nccl" if chosen.type == "cuda" else "gloo")
    return chosen


class RankEvents:
    """A rank's side of the files: rank 0 writes events and the result; every rank reads STOP."""

    def __init__(self, work: Path):
        self.work, self.lead = work, rank() == 0

    def emit(self, kind: str, *args) -> None:
        if self.lead:
            with (self.work / EVENTS).open("a") as out:
                out.write(json.dumps([kind, *args]) + "\n")

    def hooks(self) -> dict:
        """A run's callbacks (`core.callbacks.Callbacks`) as this rank passes them on: rank
        0's progress, metrics, log lines and checkpoints to the parent, and the agreed stop."""
        return {
            "progress": lambda fraction, message="": self.emit("progress", fraction, message),
            "metrics": lambda step, values: self.emit("metrics", step, values),
            "log": lambda line: self.emit("log", line),
            "should_stop": self.stop_requested,
            "checkpoint": lambda step, path: self.emit("checkpoint", step, path),
        }

    def stop_requested(self) -> bool:
        """STOP seen by any rank: all of them stop at the same step (core/ranks.py `any`)."""
        # Lazy: core.ranks loads torch, which this module leaves to the ranks (the launcher needs none).
        from core.ranks import Ranks

        return Ranks().any((self.work / STOP).exists())

    def result(self, value: dict) -> None:
        if self.lead:
            path = self.work / RESULT
            path.with_suffix(".tmp").write_text(json.dumps(value))
            path.with_suffix(".tmp").rename(path)


@contextmanager
def rank_process(*, init_group: bool = True) -> Iterator[tuple[Path, dict, object, RankEvents]]:
    """A rank's whole life, for a rank module's `main`: (work folder, spec, device, events).

    The rank dies with its launcher and takes its share of the CPU threads; with
    `init_group` it joins the process group (`rank_init`) and leaves it at the end (the reward
    model's rank leaves that to accelerate, which makes the group itself)."""
    work = rank_setup()
    spec = json.loads((work / SPEC).read_text())
    device = rank_init(spec["device"]) if init_group else spec["device"]
    try:
        yield work, spec, device, RankEvents(work)
    finally:
        if init_group:
            import torch.distributed as dist

            dist.destroy_process_group()


def write_rows(path: Path, rows) -> Path:
    """A run's data for its ranks, one JSON value a line (the spec names the file)."""
    with Path(path).open("w") as out:
        for row in rows:
            out.write(json.dumps(row) + "\n")
    return Path(path)


def read_rows(path: Path) -> list:
    with Path(path).open() as source:
        return [json.loads(line) for line in source]


def calling(callbacks) -> Callable[[str, list], None]:
    """`launch`'s on_event for a run's callbacks: each event calls the callback of its name."""
    return lambda kind, args: getattr(callbacks, kind)(*args)


def launch(
    module: str,
    spec: dict,
    work: Path,
    *,
    processes: int,
    on_event: Callable[[str, list], None],
    should_stop: Callable[[], bool],
    poll_seconds: float = 0.5,
    stop_grace_seconds: float = 120.0,
) -> dict:
    """Run `python -m module` in `processes` ranks on this machine and return rank 0's result.

    `on_event(kind, args)` receives rank 0's events as they come; `should_stop()` is asked
    every `poll_seconds`, and when it says so the ranks are told to stop (they save a
    checkpoint first, then end with a result that says they were cancelled). Raises
    ParallelRunFailed when the ranks end without a result (a crash: its log is in
    work/launch.log)."""
    _check_gpus(str(spec.get("device", "cpu")), processes)
    work.mkdir(parents=True, exist_ok=True)
    for name in (EVENTS, STOP, RESULT):
        (work / name).unlink(missing_ok=True)
    (work / SPEC).write_text(json.dumps(spec))
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",  # one machine: a rendezvous on a free local port
        f"--nproc-per-node={processes}",
        "-m",
        module,
    ]
    env = {**os.environ, "ARBITER_PARALLEL_DIR": str(work), "OMP_NUM_THREADS": "1"}
    log = (work / "launch.log").open("ab")
    proc = subprocess.Popen(
        command,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        preexec_fn=lambda: _die_with_parent(signal.SIGTERM),
    )
    read, stop_sent = 0, None
    try:
        while True:
            read = _forward(work / EVENTS, read, on_event)
            if proc.poll() is not None:
                break
            if stop_sent is None and should_stop():
                (work / STOP).touch()
                stop_sent = time.monotonic()
            if stop_sent is not None and time.monotonic() - stop_sent > stop_grace_seconds:
                break  # told to stop and did not: ended below
            time.sleep(poll_seconds)
        _forward(work / EVENTS, read, on_event)
    finally:
        _end(proc)
        log.close()
    result = work / RESULT
    if not result.exists():
        tail = (work / "launch.log").read_text(errors="replace")[-3000:]
        raise ParallelRunFailed(
            f"the {processes} training processes ended (exit status {proc.returncode}) without a result:\n{tail}"
        )
    return json.loads(result.read_text())


def _check_gpus(device: str, processes: int) -> None:
    """On GPUs each process takes one of its own (NCCL refuses two on one): refuse more
    processes than the worker sees, before starting any."""
    if not device.startswith("cuda"):
        return
    import torch

    seen = torch.cuda.device_count()
    if processes > seen:
        raise ParallelRunFailed(
            f"{processes} processes need {processes} GPUs, one each, and this worker sees {seen} "
            f"(CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES', 'unset')}); ask for at most {seen}, "
            f"or run on a worker with more GPUs"
        )


def _forward(path: Path, offset: int, on_event) -> int:
    """Pass on the complete lines of `path` after `offset`; returns the new offset."""
    if not path.exists():
        return offset
    with path.open("rb") as source:
        source.seek(offset)
        data = source.read()
    end = data.rfind(b"\n") + 1
    for line in data[:end].splitlines():
        kind, *args = json.loads(line)
        on_event(kind, args)
    return offset + end


def _end(proc: subprocess.Popen) -> None:
    """The launcher and every rank gone: SIGTERM to the group, then SIGKILL."""
    for sig, wait in ((signal.SIGTERM, 20), (signal.SIGKILL, 10)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            break
        try:
            proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            continue
        # The launcher is gone; its ranks may still be ending.
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            break
    if proc.poll() is None:
        proc.wait(timeout=10)
