"""A frozen decoder's cheap operations, formed again in the backward instead of kept for it.

A fusion or adapter step sends its gradient back through every frozen layer above the first
adapter, and autograd keeps, for that backward, what each operation of transformers' modules
saves. Some save more than their backward needs (counted on the Llama shape of
`benchmarks/llm_memory.py`, bf16, per token and layer):

- an RMSNorm upcasts its input to float32 and keeps that copy (8 KiB at width 2,048), where its
  bfloat16 input (4 KiB) is all the backward needs to form it again;
- a gated MLP, `down(act(gate(x)) * up(x))`, keeps the gate, its activation and the
  up-projection (3 × 11 KiB at width 5,632), where the gate and the up-projection suffice;
- GPT-2's `gelu_new`, written as eight elementwise operations, keeps four tensors of the MLP's
  width where its input suffices.

Here each of those regions runs as one autograd node that keeps its inputs alone and, in the
backward, runs the same operations again under the forward's autocast state and takes their
gradient. With a bf16 base the gradients are the stock modules' bit for bit; in float32 a norm's
upcast is its input itself, whose gradients then add up in another order (relative 1e-6). The
frozen base alone keeps about a third less per token. The regions are elementwise, so forming
them again costs little beside the layer's matrix products.

`keep_less_for_backward` switches transformers' RMSNorms (any class named `*RMSNorm`), its
composite GELUs and the gated MLPs of Llama, Mistral, Qwen 2/3 and Gemma 1–3 to it;
`AdapterModel` does so when built. It
applies only while a gradient is being recorded and the region's own parameters are frozen (a
fully fine-tuned base keeps the stock path); inference runs the modules' own forward.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import torch
from torch import nn

Outputs = TypeVar("Outputs", torch.Tensor, tuple[torch.Tensor, ...])

# transformers' activations written as several elementwise operations on their one input
COMPOSITE_ACTIVATIONS = frozenset(
    {"NewGELUActivation", "FastGELUActivation", "QuickGELUActivation"}
)
# transformers' classes whose forward is `down_proj(act_fn(gate_proj(x)) * up_proj(x))`
GATED_MLPS = frozenset(
    f"{family}MLP" for family in ("Llama", "Mistral", "Qwen2", "Qwen3", "Gemma", "Gemma2", "Gemma3")
)


class _FormedAgain(torch.autograd.Function):
    """`fn(*inputs)`, keeping the inputs alone; the backward forms `fn` again and differentiates."""

    @staticmethod
    def forward(ctx: Any, fn: Callable[..., Outputs], *inputs: torch.Tensor | None) -> Outputs:
        device = next(t for t in inputs if t is not None).device.type
        ctx.fn = fn
        ctx.autocast = {
            "device_type": device,
            "dtype": torch.get_autocast_dtype(device),
            "enabled": torch.is_autocast_enabled(device),
            "cache_enabled": torch.is_autocast_cache_enabled(),
        }
        ctx.save_for_backward(*inputs)
        return fn(*inputs)

    @staticmethod
    def backward(ctx: Any, *grads: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        wanted = ctx.needs_input_grad[1:]
        inputs = [
            None if t is None else t.detach().requires_grad_(w)
            for t, w in zip(ctx.saved_tensors, wanted, strict=True)
        ]
        # the forward's autocast state, its weight cache included: a weight used twice is then
        # cast once, and its two gradients add up in the cast's dtype, as in the forward's graph
        # (the cache lives until this backward's autocast ends; a CUDA graph capture has none)
        with torch.enable_grad(), torch.autocast(**ctx.autocast):
            outputs = ctx.fn(*inputs)
        outputs = outputs if isinstance(outputs, tuple) else (outputs,)
        pairs = [(o, g) for o, g in zip(outputs, grads, strict=True) if o.requires_grad]
        needed = [t for t in inputs if t is not None and t.requires_grad]
        found = torch.autograd.grad(
            [o for o, _ in pairs], needed, [g for _, g in pairs], allow_unused=True
        )
        by_input = iter(found)
        return (None, *(next(by_input) if w else None for w in wanted))


def formed_again(fn: Callable[..., Outputs], *inputs: torch.Tensor | None) -> Outputs:
    """`fn(*inputs)` (a tensor or a tuple of them) as one autograd node that keeps `inputs`
    alone: its backward runs `fn` again, under the forward's autocast state, and takes the
    gradient. For regions whose intermediate results cost more memory than forming them again
    costs time. `None` inputs are passed through."""
    return _FormedAgain.apply(fn, *inputs)


def _recording(*tensors: torch.Tensor) -> bool:
    return torch.is_grad_enabled() and any(t.requires_grad for t in tensors)


def _frozen(module: nn.Module) -> bool:
    return not any(p.requires_grad for p in module.parameters())


class LeanElementwiseForward:
    """The forward of an RMSNorm or a composite activation, elementwise operations on one
    tensor, that keeps only that tensor for the backward.

    Set as the module's `forward` (an object, so the model still pickles and deep-copies)."""

    def __init__(self, module: nn.Module):
        self.module = module

    def __call__(self, hidden_states: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        stock = type(self.module).forward
        if args or kwargs or not _recording(hidden_states) or not _frozen(self.module):
            return stock(self.module, hidden_states, *args, **kwargs)  # no lean form applies
        return formed_again(lambda x: stock(self.module, x), hidden_states)


class LeanGatedForward:
    """A gated MLP's forward that keeps the gate and the up-projection alone for the backward
    of `act(gate) * up`; the three projections run (and keep) as they do in the stock module."""

    def __init__(self, module: nn.Module):
        self.module = module

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        mlp = self.module
        gate, up = mlp.gate_proj(x), mlp.up_proj(x)
        if _recording(gate, up):
            hidden = formed_again(lambda g, u: mlp.act_fn(g) * u, gate, up)
        else:
            hidden = mlp.act_fn(gate) * up
        return mlp.down_proj(hidden)


def keep_less_for_backward(model: nn.Module) -> int:
    """Give the RMSNorms, composite activations and gated MLPs inside `model` their lean
    forward; returns how many.

    Only transformers' own classes are switched: RMSNorms are those named `*RMSNorm`, and a call
    with more than the hidden states runs the stock forward. Other modules, and ones already
    switched, are left as they are."""
    switched = 0
    for module in model.modules():
        name = type(module).__name__
        switched_already = isinstance(
            module.__dict__.get("forward"), LeanElementwiseForward | LeanGatedForward
        )
        # remote code (`transformers_modules.`) may give a known name another forward
        if switched_already or not type(module).__module__.startswith("transformers."):
            continue
        if name.endswith("RMSNorm") or name in COMPOSITE_ACTIVATIONS:
            module.forward = LeanElementwiseForward(module)
        elif name in GATED_MLPS:
            module.forward = LeanGatedForward(module)
        else:
            continue
        switched += 1
    return switched
