"""The last layer computed at the first token only, where a head reads nothing else of it.

A head that pools the first token (`cls`) reads one row of the last layer's output. In a
post-norm layer (BERT: `LN(h + r)` after each sub-layer) everything after the attention's
residual norm works token by token, so the feed-forward block, its adapters and a fusion need
that one row: the attention before it still reads every token's keys and values. Cutting the
norm's input to the first row gives the same logits, loss and gradients as the whole layer (up to
rounding), without about 30 of the 39 d² multiply-adds per token that a BERT layer with a
16-adapter fusion spends in a training step (forward and backward): by that count 6 % of a
BERT-base fusion step and 13 % of MiniLM's six layers (measured by `benchmarks/first_token.py`:
5-7 % and 9-13 %).

It applies to the built-in post-norm families whose last layer is a module of its own (not
ALBERT's shared layer, nor a declared layout, whose layer code is not known here), with two or
more layers and without activation checkpointing (its recomputation runs outside the forward).
Code that reads every position of the last layer, such as the fusion-weight capture, runs inside
`every_position`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from typing import Any

from torch import nn

from adapterfleet.adapters.architectures import (
    SLOT_MAPS,
    base_encoder,
    declared_slot_map,
    encoder_layers,
)
from adapterfleet.adapters.base_model import checkpointing_on

_EVERY_POSITION_ATTR = "_adapterfleet_every_position"
# post-norm, each layer a module of its own, every module after the attention's norm per token
FAMILIES = frozenset(
    ("bert", "roberta", "xlm-roberta", "electra", "deberta", "deberta-v2", "distilbert")
)


def _first_row(_module: nn.Module, args: tuple[Any, ...]) -> tuple[Any, ...]:
    """A forward pre-hook: the norm's input (batch, tokens, d) cut to the first token."""
    return (args[0][:, :1], *args[1:])


def _attention_norm_of_last_layer(model: nn.Module) -> nn.Module | None:
    encoder = base_encoder(model)
    model_type = getattr(getattr(encoder, "config", None), "model_type", None)
    if model_type not in FAMILIES or declared_slot_map(encoder) is not None:
        return None
    if getattr(encoder, _EVERY_POSITION_ATTR, 0) or checkpointing_on(encoder):
        return None
    layers = encoder_layers(model)
    if len(layers) < 2:  # DeBERTa-v2's convolution reads the first layer's every position
        return None
    return layers[-1].get_submodule(SLOT_MAPS[model_type].attention_norm)


def last_layer_at_first_token(model: nn.Module, pooling: str) -> Any:
    """A context in which `model`'s encoder computes its last layer at the first token only,
    when the head pools it (`pooling` "cls") and the family allows it; else a no-op context. The
    encoder's `last_hidden_state` then has one position."""
    norm = _attention_norm_of_last_layer(model) if pooling == "cls" else None
    return nullcontext() if norm is None else _cut(norm)


@contextmanager
def _cut(norm: nn.Module) -> Iterator[None]:
    handle = norm.register_forward_pre_hook(_first_row)
    try:
        yield
    finally:
        handle.remove()


@contextmanager
def every_position(model: nn.Module) -> Iterator[None]:
    """Inside the block the last layer runs at every position (for code that reads them all)."""
    encoder = base_encoder(model)
    setattr(encoder, _EVERY_POSITION_ATTR, getattr(encoder, _EVERY_POSITION_ATTR, 0) + 1)
    try:
        yield
    finally:
        setattr(encoder, _EVERY_POSITION_ATTR, getattr(encoder, _EVERY_POSITION_ATTR) - 1)
