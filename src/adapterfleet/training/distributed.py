"""Data parallelism over the processes of a `torch.distributed` group (Ray Train's workers).

The fit loop is the same code for one process and for many. With K processes, each rank takes
its rows of every global batch (every K-th row, so a length-grouped batch, sorted longest first,
splits into shards of about equal cost), weights its loss by its share of the global batch, and
the trainable gradients are summed over the ranks before each optimizer step. The shares add up
to the global batch's mean, so a K-process step equals the one-process step on the same global
batch up to float summation order: `batch_size` stays the global batch. Dev predictions are
gathered from every rank, so all ranks compute the same metrics and stop at the same epoch.

This is what DistributedDataParallel computes for the trainable parameters; done by hand, it
all-reduces one flat buffer of only the adapter's (or fusion's) gradients, leaves the frozen base
untouched, and lets a rank whose share of a short last batch is empty still take part. Gloo on
CPU, NCCL on GPU: the group's backend is the caller's (Ray Train sets it up).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from torch._utils import _flatten_dense_tensors, _unflatten_dense_tensors

from adapterfleet.training.runtime import Batch, batch_size_of


@dataclass(frozen=True)
class DataParallel:
    """This process's place in the group: rank `rank` of `world_size` (0 of 1 when alone)."""

    rank: int = 0
    world_size: int = 1

    @classmethod
    def current(cls) -> DataParallel:
        """The initialised default process group's rank and size, else a group of one."""
        if dist.is_available() and dist.is_initialized():
            return cls(dist.get_rank(), dist.get_world_size())
        return cls()

    @property
    def active(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        """Rank 0: the one that writes files and logs."""
        return self.rank == 0

    def shard(self, batch: Batch) -> tuple[dict[str, Any], float]:
        """This rank's rows of a global batch, and their share of it (1.0 when alone)."""
        if not self.active:
            return dict(batch), 1.0
        total = batch_size_of(batch)
        rows = torch.arange(self.rank, total, self.world_size)
        local = {key: _rows_of(value, rows, total) for key, value in batch.items()}
        return local, len(rows) / total

    def broadcast_(self, params: Sequence[torch.Tensor]) -> None:
        """Rank 0's values into every rank's `params` (the start of training, as DDP does)."""
        if not self.active:
            return
        flat = _flatten_dense_tensors([p.detach() for p in params])
        dist.broadcast(flat, src=0)
        with torch.no_grad():
            for param, value in zip(params, _unflatten_dense_tensors(flat, params), strict=True):
                param.copy_(value)

    def sum_gradients_(self, params: Sequence[torch.nn.Parameter]) -> None:
        """Sum each parameter's gradient over the ranks, in one all-reduce; a rank that had no
        rows this step contributes zeros."""
        if not self.active:
            return
        for param in params:
            if param.grad is None:
                param.grad = torch.zeros_like(param)
        grads = [p.grad for p in params]
        flat = _flatten_dense_tensors(grads)
        dist.all_reduce(flat)
        for grad, total in zip(grads, _unflatten_dense_tensors(flat, grads), strict=True):
            grad.copy_(total)

    def sum(self, value: torch.Tensor) -> torch.Tensor:
        """`value` summed over the ranks (a copy)."""
        if not self.active:
            return value
        total = value.clone()
        dist.all_reduce(total)
        return total

    def share(self, value: Any) -> Any:
        """Rank 0's `value` (picklable) on every rank."""
        if not self.active:
            return value
        box = [value]
        dist.broadcast_object_list(box, src=0)
        return box[0]

    def gather(self, tensors: list[torch.Tensor]) -> list[torch.Tensor]:
        """Every rank's `tensors` (on the CPU), rank 0's first, on every rank."""
        if not self.active:
            return tensors
        gathered: list[list[torch.Tensor] | None] = [None] * self.world_size
        dist.all_gather_object(gathered, [t.cpu() for t in tensors])
        return [t for part in gathered for t in part or []]


def _rows_of(value: Any, rows: torch.Tensor, total: int) -> Any:
    if isinstance(value, torch.Tensor) and value.dim() > 0 and value.shape[0] == total:
        return value.index_select(0, rows)
    return value
