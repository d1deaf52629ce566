"""The bottleneck adapter and the two slot wrappers that place adapters inside an encoder layer."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn
from torch.nn import functional as F

ACTIVATIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "relu": F.relu,
    "swish": F.silu,
    "gelu": F.gelu,
    "tanh": torch.tanh,
}


class Bottleneck(nn.Module):
    """`A(x, residual) = residual + W_up · f(W_down · x + b_down) + b_up`, with `m = d // rf`."""

    def __init__(self, hidden_size: int, bottleneck_size: int, non_linearity: str, init_std: float):
        super().__init__()
        self.non_linearity = non_linearity
        self.adapter_down = nn.Linear(hidden_size, bottleneck_size)
        self.adapter_up = nn.Linear(bottleneck_size, hidden_size)
        for linear in (self.adapter_down, self.adapter_up):
            nn.init.normal_(linear.weight, std=init_std)
            nn.init.zeros_(linear.bias)

    @property
    def activation(self) -> Callable[[torch.Tensor], torch.Tensor]:
        return ACTIVATIONS[self.non_linearity]

    def delta(self, x: torch.Tensor) -> torch.Tensor:
        """The adapter's contribution `up(f(down(x)))`, without the residual."""
        return self.adapter_up(self.activation(self.adapter_down(x)))

    def forward(self, x: torch.Tensor, residual: torch.Tensor | None = None) -> torch.Tensor:
        return (x if residual is None else residual) + self.delta(x)


class NormSlot(nn.Module):
    """Wraps a sub-layer's LayerNorm, which receives `x = h + r`.

    Pfeiffer, as the reference computes it: `LN(h + up(down(LN(h + r))) + r)`, which is
    `LN(x + delta(LN(x)))`.
    A fusion layer replaces `delta` with its mix of several adapters, queried by `LN(x)`.
    """

    def __init__(self, layer_norm: nn.LayerNorm):
        super().__init__()
        self.layer_norm = layer_norm
        self.adapters = nn.ModuleDict()
        self.fusions = nn.ModuleDict()
        self.active_adapter: str | None = None
        self.active_fusion: str | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.active_fusion is not None:
            fusion = self.fusions[self.active_fusion]
            adapters = [self.adapters[name] for name in fusion.adapter_names]
            return self.layer_norm(x + fusion(self.layer_norm(x), adapters))
        if self.active_adapter is not None and self.active_adapter in self.adapters:
            return self.layer_norm(x + self.adapters[self.active_adapter].delta(self.layer_norm(x)))
        return self.layer_norm(x)


class OutputSlot(nn.Module):
    """Wraps the module that yields a sub-layer's `h` (Houlsby): returns `h + delta(h)`."""

    def __init__(self, inner: nn.Module):
        super().__init__()
        self.inner = inner
        self.adapters = nn.ModuleDict()
        self.active_adapter: str | None = None

    def forward(self, *args: object, **kwargs: object) -> object:
        out = self.inner(*args, **kwargs)
        if self.active_adapter is None or self.active_adapter not in self.adapters:
            return out
        adapter = self.adapters[self.active_adapter]
        if isinstance(out, tuple):
            return (adapter(out[0]), *out[1:])
        return adapter(out)
