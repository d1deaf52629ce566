"""The folded fusion output in training: its product's input formed again in the backward.

The folded output is `[a ⊙ s̃, s] V_upᵀ`: the activations `a` (..., M) weighted per adapter by the
fusion weights `s` (..., N; `s̃` repeats each over its adapter's units), and the weights
themselves, times the value-and-up-projection matrix `V_up` (d, M + N). Autograd would keep that
product's (..., M + N) input per token for the gradient of `V_up`; the backward here keeps `a` and
`s` instead, which the step keeps anyway, and multiplies them out again (one product per element).
Adapters of equal width only: the usual fleet, and the form whose weighting is a broadcast.

Under autocast the product runs in autocast's dtype, as `F.linear` would, and the gradients come
back in each input's own dtype.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.nn import functional as F


def weight_slices(a: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    """Each of the N equal slices of `a` (..., M) times its weight in `s` (..., N): a broadcast
    over a view, so autograd keeps `s`, not an (..., M) copy of it."""
    return (a.unflatten(-1, (s.shape[-1], -1)) * s.unsqueeze(-1)).flatten(-2)


def _product_input(a: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    weighted = weight_slices(a, s)
    return torch.cat([weighted, s.to(weighted.dtype)], -1)


def _compute_dtype(tensor: torch.Tensor) -> torch.dtype | None:
    device = tensor.device.type
    return torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device) else None


class WeightedUp(torch.autograd.Function):
    """`[a ⊙ s̃, s] upᵀ`, its backward from `a`, `s` and `up` (see the module's docstring)."""

    @staticmethod
    def forward(ctx: Any, a: torch.Tensor, s: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
        ctx.dtype = _compute_dtype(a) or up.dtype  # the dtype F.linear would compute in
        ctx.save_for_backward(a, s, up)
        with torch.autocast(a.device.type, enabled=False):
            return F.linear(_product_input(a, s).to(ctx.dtype), up.to(ctx.dtype))

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        a, s, up = ctx.saved_tensors
        grad = grad.to(ctx.dtype)
        grad_a = grad_s = grad_up = None
        if ctx.needs_input_grad[2]:
            x = _product_input(a, s).to(ctx.dtype)
            grad_up = (grad.flatten(0, -2).T @ x.flatten(0, -2)).to(up.dtype)
        if ctx.needs_input_grad[0] or ctx.needs_input_grad[1]:
            grad_x = grad @ up.to(ctx.dtype)  # (..., M + N)
            grad_weighted, grad_direct = grad_x.split([a.shape[-1], s.shape[-1]], -1)
            # in the dtype the forward weighted in (a's and s's promoted), as autograd would
            promoted = torch.promote_types(a.dtype, s.dtype)
            grouped = grad_weighted.unflatten(-1, (s.shape[-1], -1)).to(promoted)
            if ctx.needs_input_grad[0]:
                grad_a = (grouped * s.unsqueeze(-1)).flatten(-2).to(a.dtype)
            if ctx.needs_input_grad[1]:
                by_adapter = (grouped * a.unflatten(-1, (s.shape[-1], -1))).sum(-1)
                grad_s = (by_adapter + grad_direct.to(promoted)).to(s.dtype)
        return grad_a, grad_s, grad_up


def weighted_up(a: torch.Tensor, s: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    """`[a ⊙ s̃, s] upᵀ` for adapters of equal width (a: (..., M), s: (..., N), up: (d, M + N))."""
    return WeightedUp.apply(a, s, up)
