"""Dropout whose masks are drawn from packed random bits on a CPU.

torch's CPU dropout draws its mask with one generator call per element (`bernoulli_`): on the
training steps of `make bench` (MiniLM at 32×128, 15 masks of 1.6 M elements; BERT-base at 8×128,
39 masks of 0.8 M) that took 0.22–0.33 s, 5–14 % of a step on 2 cores. Here each 64-bit random
word gives four 15-bit draws, and an element is kept when its draw is at or above p · 2¹⁵: the
dropout forward of a step takes 2.2–3.8× less time (`benchmarks/dropout.py`).

Elements are kept independently, with probability 1 − p′, where p′ is p rounded to a multiple of
2⁻¹⁵ (p = 0.1: p′ = 0.100006), and the kept ones are scaled by 1 / (1 − p′), so the output's
expectation is its input, as with `nn.Dropout`. The masks come from torch's seeded generator:
a seeded run draws the same masks again. On other devices (CUDA's dropout is a fused kernel
already), in eval mode, and for p of 0 or 1 it is `nn.Dropout`. The attention probabilities'
dropout, which SDPA draws inside the attention, gets the same masks through `attention.py`.
"""

from __future__ import annotations

import torch
from torch import nn

BITS = 15
LEVELS = 1 << BITS  # the draws: 0 .. LEVELS - 1
_LOW_BITS = LEVELS - 1  # random_() fills an int64 with 63 random bits: 15 from each quarter


def keep_mask(shape: torch.Size, p: float, device: torch.device) -> torch.Tensor:
    """A boolean mask of `shape`, each element True (kept) with probability 1 − p′."""
    count = shape.numel()
    words = torch.empty((count + 3) // 4, dtype=torch.int64, device=device).random_()
    draws = words.view(torch.int16)[:count].view(shape)
    return draws.bitwise_and(_LOW_BITS) >= round(p * LEVELS)


class PackedDropout(nn.Dropout):
    """`nn.Dropout` with the CPU masks of `keep_mask` (see the module's docstring)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dropped = round(self.p * LEVELS)
        if not self.training or x.device.type != "cpu" or not 0 < dropped < LEVELS:
            return super().forward(x)
        scale = LEVELS / (LEVELS - dropped)
        mask = keep_mask(x.shape, self.p, x.device).to(x.dtype).mul_(scale)
        return x.mul_(mask) if self.inplace else x * mask


def pack_dropout(module: nn.Module) -> int:
    """Replace every `nn.Dropout` inside `module` (an encoder from transformers, say) by a
    `PackedDropout` of the same p; returns how many. Subclasses of `nn.Dropout` are left alone."""
    replaced = 0
    for parent in list(module.modules()):
        for name, child in list(parent.named_children()):
            if type(child) is nn.Dropout:
                packed = PackedDropout(child.p, child.inplace).train(child.training)
                setattr(parent, name, packed)
                replaced += 1
    return replaced
