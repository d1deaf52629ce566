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


class _Residual:
    """The residual stream a pre-norm layer's feed-forward norm received, kept for its slot."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value: torch.Tensor | None = None


class MixSlot(nn.Module):
    """The Pfeiffer position of one layer: its adapters and the fusions that mix them.

    `mix(x)` is the active adapter's `delta(x)` or the active fusion's mix queried by `x`, in the
    adapters' own dtype (float32 beside a bf16 base), given back in `x`'s dtype; None when neither
    is active.
    """

    def __init__(self) -> None:
        super().__init__()
        self.adapters = nn.ModuleDict()
        self.fusions = nn.ModuleDict()
        self.active_adapter: str | None = None
        self.active_fusion: str | None = None

    def mix(self, x: torch.Tensor) -> torch.Tensor | None:
        if self.active_fusion is not None:
            fusion = self.fusions[self.active_fusion]
            adapters = [self.adapters[name] for name in fusion.adapter_names]
            return fusion(_as(x, adapters[0]), adapters).to(x.dtype)
        if self.active_adapter is not None and self.active_adapter in self.adapters:
            adapter = self.adapters[self.active_adapter]
            return adapter.delta(_as(x, adapter)).to(x.dtype)
        return None


def _as(x: torch.Tensor, module: nn.Module) -> torch.Tensor:
    return x.to(next(module.parameters()).dtype)


class NormSlot(MixSlot):
    """Wraps a post-norm sub-layer's LayerNorm, which receives `x = h + r`.

    Pfeiffer, as the reference computes it: `LN(h + up(down(LN(h + r))) + r)`, which is
    `LN(x + delta(LN(x)))`.
    A fusion layer replaces `delta` with its mix of several adapters, queried by `LN(x)`.
    """

    def __init__(self, layer_norm: nn.Module):
        super().__init__()
        self.layer_norm = layer_norm

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        normed = self.layer_norm(x)
        delta = self.mix(normed)
        return normed if delta is None else self.layer_norm(x + delta)


class ResidualTap(nn.Module):
    """Wraps a pre-norm layer's feed-forward norm to keep its input, the residual stream `r`."""

    def __init__(self, inner: nn.Module):
        super().__init__()
        self.inner = inner
        self.residual = _Residual()

    def forward(self, x: torch.Tensor, *args: object, **kwargs: object) -> object:
        self.residual.value = x
        return self.inner(x, *args, **kwargs)


class PreNormSlot(MixSlot):
    """Wraps a pre-norm layer's feed-forward module, whose output `h` the layer adds to `r`.

    Pfeiffer, as the reference computes it without a norm: `h + r + delta(h + r)`; this slot gives
    `h + delta(h + r)` and the layer's own residual add the rest. The fusion is queried by `h + r`.
    """

    def __init__(self, inner: nn.Module, tap: ResidualTap):
        super().__init__()
        self.inner = inner
        self._residual = tap.residual

    def forward(self, *args: object, **kwargs: object) -> object:
        out = self.inner(*args, **kwargs)
        h = out[0] if isinstance(out, tuple) else out
        residual, self._residual.value = self._residual.value, None
        if residual is None:
            return out
        delta = self.mix(h + residual)
        if delta is None:
            return out
        return (h + delta, *out[1:]) if isinstance(out, tuple) else h + delta


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
        h = out[0] if isinstance(out, tuple) else out
        h = h + adapter.delta(_as(h, adapter)).to(h.dtype)
        return (h, *out[1:]) if isinstance(out, tuple) else h


class ReadingSlot(OutputSlot):
    """An `OutputSlot` whose adapter reads another module's input, tapped: `h + delta(x)`.

    ALBERT's attention adapter in AdapterHub 1.3 reads the attention's input (the layer input),
    not its output; this slot computes that, so adapters move between the two unchanged.
    """

    def __init__(self, inner: nn.Module, tap: ResidualTap):
        super().__init__(inner)
        self._source = tap.residual

    def forward(self, *args: object, **kwargs: object) -> object:
        out = self.inner(*args, **kwargs)
        source, self._source.value = self._source.value, None
        if source is None or self.active_adapter not in self.adapters:
            return out
        adapter = self.adapters[self.active_adapter]
        h = out[0] if isinstance(out, tuple) else out
        h = h + adapter.delta(_as(source, adapter)).to(h.dtype)
        return (h, *out[1:]) if isinstance(out, tuple) else h
