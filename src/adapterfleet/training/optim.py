"""AdamW over the trainable parameters and its linear warm-up / decay schedule."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch
from torch.autograd.graph import increment_version
from torch.optim.lr_scheduler import LambdaLR


def parameter_groups(params: Sequence[torch.nn.Parameter], weight_decay: float) -> list[dict]:
    """Weight decay for matrices (ndim >= 2) only; biases and norm scales (ndim < 2) get none."""
    decay = [p for p in params if p.ndim >= 2]
    no_decay = [p for p in params if p.ndim < 2]
    groups = [
        {"params": decay, "weight_decay": weight_decay},
        {"params": no_decay, "weight_decay": 0.0},
    ]
    return [g for g in groups if g["params"]]


class FusedAdamW(torch.optim.AdamW):
    """torch's fused AdamW, which also marks the parameters it wrote as modified in place: its
    kernel leaves their version counters as they were (torch 2.13), and whatever keys a cache on
    them (a fusion layer's folded form) would otherwise take new weights for the old ones."""

    def __init__(self, params: list[dict], lr: float) -> None:
        super().__init__(params, lr=lr, fused=True)

    def step(self, closure: Callable[[], float] | None = None) -> float | None:
        loss = super().step(closure)
        increment_version([p for group in self.param_groups for p in group["params"]])
        return loss


def build_optimizer(
    params: Sequence[torch.nn.Parameter], learning_rate: float, weight_decay: float
) -> torch.optim.AdamW:
    """AdamW over exactly `params`, in its fused form on a CPU or a GPU (as the Hugging Face
    Trainer's default `adamw_torch_fused` since torch 2.8): one kernel per step for all the
    parameters instead of a few per tensor, where a fusion's step has dozens of tensors. On
    2 CPU cores a BERT-base fusion's 21.8 M parameters take 6.5 ms a step instead of 42."""
    groups = parameter_groups(params, weight_decay)
    if params and all(p.device.type in ("cpu", "cuda") for p in params):
        return FusedAdamW(groups, learning_rate)
    return torch.optim.AdamW(groups, lr=learning_rate)


def warmup_steps(total_steps: int, warmup_ratio: float) -> int:
    """Number of warm-up optimizer steps: ceil(ratio * total)."""
    return math.ceil(total_steps * warmup_ratio)


def linear_schedule(total_steps: int, warmup: int) -> Callable[[int], float]:
    """LR factor per optimizer step: 0 → 1 over `warmup` steps, then linearly down to 0 at total."""

    def factor(step: int) -> float:
        if step < warmup:
            return step / warmup
        return max(0.0, (total_steps - step) / max(1, total_steps - warmup))

    return factor


def build_scheduler(
    optimizer: torch.optim.Optimizer, total_steps: int, warmup_ratio: float
) -> LambdaLR:
    """Linear decay with optional warm-up, stepped once per optimizer step."""
    factor = linear_schedule(total_steps, warmup_steps(total_steps, warmup_ratio))
    return LambdaLR(optimizer, factor)


def set_scheduler_step(scheduler: LambdaLR, last_epoch: int) -> None:
    """Move a fresh scheduler to `last_epoch` and set the optimizer's LRs to match (for resume)."""
    scheduler.last_epoch = last_epoch
    groups = scheduler.optimizer.param_groups
    lrs = [
        base * fn(last_epoch)
        for base, fn in zip(scheduler.base_lrs, scheduler.lr_lambdas, strict=True)
    ]
    for group, lr in zip(groups, lrs, strict=True):
        group["lr"] = lr
    scheduler._last_lr = lrs  # what get_last_lr() reports
