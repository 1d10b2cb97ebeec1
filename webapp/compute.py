"""Where training code runs: picked when a run starts, never assumed (plain Python, no Django).

CUDA when the worker has a GPU (bf16 where the GPU supports it), the CPU otherwise.
`ARBITER_DEVICE` (cpu, cuda, cuda:1, ...) overrides the choice on a worker.
"""

from __future__ import annotations

import os
import platform
import socket
from dataclasses import asdict, dataclass, replace


@dataclass(frozen=True)
class Compute:
    device: str  # what torch is given: "cpu", "cuda", "cuda:1"
    name: str  # human-readable: "CPU (2 threads)", "NVIDIA H100 80GB HBM3"
    bf16: bool  # train in bfloat16 mixed precision
    gpus: int  # GPUs visible to this worker (accelerate can use several)
    worker: str  # host name of the machine the run executes on
    threads: int = 0  # torch's threads on the CPU (0 on a GPU)

    def as_json(self) -> dict:
        return asdict(self)


def pick_compute(preferred: str | None = None) -> Compute:
    import torch

    choice = preferred or os.environ.get("ARBITER_DEVICE", "auto")
    worker = socket.gethostname() or platform.node()
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if choice.startswith("cuda") or (choice == "auto" and gpus):
        if not gpus:
            raise RuntimeError(f"ARBITER_DEVICE={choice} but this worker has no CUDA device.")
        device = "cuda" if choice == "auto" else choice
        index = torch.device(device).index or 0
        return Compute(
            device=device,
            name=torch.cuda.get_device_name(index),
            bf16=bool(torch.cuda.is_bf16_supported()),
            gpus=gpus,
            worker=worker,
        )
    threads = torch.get_num_threads()
    return Compute(device="cpu", name=cpu_name(threads), bf16=False, gpus=0, worker=worker, threads=threads)


def cpu_name(threads: int, processes: int = 1) -> str:
    plural = "s" if threads != 1 else ""
    return (
        f"CPU ({processes} processes x {threads} thread{plural})"
        if processes > 1
        else f"CPU ({threads} thread{plural})"
    )


def compute_for(compute: Compute, config) -> Compute:
    """The compute as the run will use it: on the CPU, the torch threads its config sets
    (`threads`, 0 for torch's own count) and its processes, so the run's page says what its
    config does (one value feeds both)."""
    threads = getattr(config, "threads", 0) or 0
    processes = getattr(config, "processes", 1) or 1
    if compute.device != "cpu" or (not threads and processes == 1):
        return compute
    threads = threads or compute.threads or 1
    return replace(compute, name=cpu_name(threads, processes), threads=threads)


# Training memory per parameter on the CPU: fp32 weights, gradients and Adam's two moments, plus
# activations and the reference copy RL keeps (a rule of thumb: about 20 bytes).
BYTES_PER_PARAMETER = 20


def available_memory_bytes() -> int | None:
    """MemAvailable of this machine (Linux), or None where it cannot be read."""
    try:
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def capacity_problems(config, compute: Compute, *, cpus: int | None = None, memory: int | None = None) -> list[str]:
    """What a run's settings ask that this worker cannot give, in words (checked when the run
    starts, where only the worker knows its cores and memory): processes or torch threads beyond
    its CPUs, and on the CPU a model whose training would not fit in its memory."""
    cpus = cpus or os.cpu_count() or 1
    problems = []
    processes = getattr(config, "processes", 1) or 1
    threads = getattr(config, "threads", 0) or 0
    if compute.device == "cpu" and processes > cpus:
        problems.append(f"processes: {processes} on a worker with {cpus} CPUs; at most {cpus}.")
    if compute.device != "cpu" and processes > max(compute.gpus, 1):
        problems.append(f"processes: {processes} on a worker with {compute.gpus} GPUs; at most {max(compute.gpus, 1)}.")
    if threads > cpus:
        problems.append(f"threads: {threads} on a worker with {cpus} CPUs; at most {cpus} (0: torch's choice).")
    if compute.device == "cpu" and processes * max(threads, 1) > cpus:
        problems.append(f"processes x threads: {processes} x {max(threads, 1)} on {cpus} CPUs; at most {cpus} in all.")
    hidden, layers = getattr(config, "hidden", 0), getattr(config, "layers", 0)
    memory = memory if memory is not None else available_memory_bytes()
    if compute.device == "cpu" and hidden and layers and memory:
        needed = 12 * layers * hidden * hidden * BYTES_PER_PARAMETER * processes
        if needed > memory:
            problems.append(
                f"hidden {hidden} x layers {layers}: training it needs about {needed / 2**30:.1f} GiB, and this "
                f"worker has {memory / 2**30:.1f} GiB free; choose a smaller model or a GPU worker."
            )
    return problems
