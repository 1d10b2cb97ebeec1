"""The one data-parallel mechanism of the training loops: a process's view of the others.

Every process of a run (core/parallel.py launches them) holds the same model and draws the
same batches; each computes its share of a batch (`mine`, `share`), normalises its loss by
the whole batch's count (`total`), so that the processes' losses are parts of one mean, and
the gradients are summed over the processes before the step (`sum_gradients`): every
process takes the step one process would take on the whole batch. Decisions every process
must share (stop, the time limit, a non-finite loss) are agreed by `any`, `all_true` and
`latest`. In one process every method here is the identity, so a loop written against
`Ranks` is the same code with one process or many.

Used by behaviour cloning (training/policy/bc.py), RL (training/rl/trainer.py) and the stop
every run's ranks agree on (core/parallel.py `RankEvents`). The reward model trains in TRL's
RewardTrainer, whose loop accelerate makes data-parallel (torch's DistributedDataParallel);
its launch, events and stop are core/parallel.py's like the others'.

Item `i` of a batch (in the order one process would take them) belongs to process
`(i // group) % world`: for RLOO and GRPO a task's group of episodes stays in one process.
"""

from __future__ import annotations

import torch


class Ranks:
    """This process's place in the run: `world` processes, this one `rank`, the first the `lead`."""

    def __init__(self):
        import torch.distributed as dist

        self.dist = dist
        self.on = dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1
        self.world = dist.get_world_size() if self.on else 1
        self.rank = dist.get_rank() if self.on else 0
        self.lead = self.rank == 0
        self.device = torch.device("cuda", torch.cuda.current_device()) if self.on and self._nccl() else "cpu"

    def _nccl(self) -> bool:
        return self.dist.get_backend() == "nccl"

    def mine(self, n: int, group: int = 1) -> list[int]:
        """The indices, of `n` items in groups of `group`, this process takes."""
        return [i for i in range(n) if (i // group) % self.world == self.rank]

    def share(self, items: list) -> list:
        """This process's items of a batch (`mine` of its length)."""
        return [items[i] for i in self.mine(len(items))]

    def local(self, order: torch.Tensor, positions: dict[int, int]) -> torch.Tensor:
        """This process's rows of a minibatch of batch indices (`positions`: batch index -> row here)."""
        return torch.tensor([positions[int(i)] for i in order if int(i) in positions], dtype=torch.long)

    def total(self, tensor: torch.Tensor) -> torch.Tensor:
        """`tensor` summed over the processes (a copy; autograd does not pass through it)."""
        if not self.on:
            return tensor
        summed = tensor.detach().to(self.device, torch.float64).clone()
        self.dist.all_reduce(summed)
        return summed.to(tensor.device, tensor.dtype)

    def any(self, flag: bool) -> bool:
        """True when `flag` is true in any process (a stop asked for in one stops all)."""
        return bool(self._max(float(flag))) if self.on else bool(flag)

    def all_true(self, flag: bool) -> bool:
        return not self.any(not flag)

    def latest(self, seconds: float) -> float:
        """The largest of the processes' clocks, so that all of them stop at the same step."""
        return self._max(seconds) if self.on else seconds

    def _max(self, value: float) -> float:
        tensor = torch.tensor([value], dtype=torch.float64, device=self.device)
        self.dist.all_reduce(tensor, op=self.dist.ReduceOp.MAX)
        return float(tensor.item())

    def barrier(self) -> None:
        if self.on:
            self.dist.barrier()

    def gather(self, items: list, indices: list[int]) -> list:
        """Every process's `items` (item k is batch index `indices[k]`) in batch order."""
        if not self.on:
            return list(items)
        parts: list = [None] * self.world
        self.dist.all_gather_object(parts, list(zip(indices, items)))
        return [item for _, item in sorted((pair for part in parts for pair in part), key=lambda pair: pair[0])]

    def sum_gradients(self, parameters: list[torch.nn.Parameter], bucket: int = 1 << 24) -> None:
        """Add up the gradients of every process (a process with no share of a minibatch adds zeros),
        in flat buckets of up to `bucket` numbers."""
        if not self.on:
            return
        for parameter in parameters:
            if parameter.grad is None:
                parameter.grad = torch.zeros_like(parameter)
        grads = [p.grad for p in parameters]
        start = 0
        while start < len(grads):
            end, size = start, 0
            while end < len(grads) and (end == start or size + grads[end].numel() <= bucket):
                size += grads[end].numel()
                end += 1
            flat = torch.cat([g.reshape(-1) for g in grads[start:end]])
            self.dist.all_reduce(flat)
            offset = 0
            for g in grads[start:end]:
                g.copy_(flat[offset : offset + g.numel()].view_as(g))
                offset += g.numel()
            start = end
