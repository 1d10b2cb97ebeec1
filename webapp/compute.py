"""Where training code runs: picked when a run starts, never assumed (plain Python, no Django).

CUDA when the worker has a GPU (bf16 where the GPU supports it), the CPU otherwise.
`ARBITER_DEVICE` (cpu, cuda, cuda:1, ...) overrides the choice on a worker.
"""

from __future__ import annotations

import os
import platform
import socket
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Compute:
    device: str  # what torch is given: "cpu", "cuda", "cuda:1"
    name: str  # human-readable: "CPU (2 threads)", "NVIDIA H100 80GB HBM3"
    bf16: bool  # train in bfloat16 mixed precision
    gpus: int  # GPUs visible to this worker (accelerate can use several)
    worker: str  # host name of the machine the run executes on

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
    return Compute(device="cpu", name=f"CPU ({torch.get_num_threads()} threads)", bf16=False, gpus=0, worker=worker)
