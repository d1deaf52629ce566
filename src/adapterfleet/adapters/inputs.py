"""What `AdapterModel.forward` takes, checked, and what it hands the base model.

The model takes `input_ids`, `attention_mask`, `token_type_ids` and `position_ids` as keywords,
or one mapping of them (a tokenizer's `BatchEncoding`, a training batch whose other keys, such as
`labels`, it does not read). Any other keyword is refused: a typo (`attention_masks=`) would
otherwise drop the mask without a word.
"""

from __future__ import annotations

import functools
import inspect

import torch
from torch import nn

from adapterfleet.adapters.architectures import UnsupportedModelError, slot_map_for
from adapterfleet.errors import did_you_mean

INPUTS = ("input_ids", "attention_mask", "token_type_ids", "position_ids")


def unknown_arguments(unknown: list[str]) -> str:
    """Why `unknown` keywords are refused, with what the forward takes instead."""
    names = ", ".join(repr(name) for name in unknown)
    text = (
        f"AdapterModel.forward() got unexpected keyword argument(s) {names}"
        f"{did_you_mean(unknown, INPUTS)}; it takes {', '.join(INPUTS)} (or one mapping of them)"
    )
    if "labels" in unknown:
        text += (
            "; AdapterModel returns logits and the loss is the caller's: compute it from them, "
            "e.g. cross_entropy(model(**inputs), labels)"
        )
    return text


def choices_of(input_ids: torch.Tensor, head: str, head_type: str) -> int | None:
    """The number of choices of a multiple-choice batch (batch, choices, tokens), None for the
    (batch, tokens) batch of any other head; a batch of the other shape is refused, as its
    logits would come out reshaped and wrong."""
    choices = head_type == "multiple_choice"
    expected = "(batch, choices, tokens)" if choices else "(batch, tokens)"
    if input_ids.dim() != (3 if choices else 2):
        raise ValueError(
            f"head {head!r} is a {head_type} head: it takes input_ids of shape {expected}, "
            f"got {tuple(input_ids.shape)}"
        )
    return input_ids.shape[1] if choices else None


@functools.cache
def _arguments(encoder_type: type) -> frozenset[str]:
    """What the forward of an encoder class takes, read once per class (not at every call)."""
    return frozenset(inspect.signature(encoder_type.forward).parameters)


def takes(encoder: nn.Module, argument: str) -> bool:
    return argument in _arguments(type(encoder))


def positions_from_mask(mask: torch.Tensor) -> torch.Tensor:
    """Each real token's position among the real tokens of its row, as Hugging Face counts them
    for a padded decoder (`cumsum(mask) - 1`, 0 on left padding): a row reads the same whether
    it is padded on the left or on the right."""
    return (mask.long().cumsum(-1) - 1).clamp_min(0)


def _counts_positions(encoder: nn.Module) -> bool:
    try:
        return slot_map_for(encoder).positions_from_mask
    except UnsupportedModelError:  # a head on a family without a layout: as it is
        return False


def encoder_kwargs(
    encoder: nn.Module,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor | None,
    token_type_ids: torch.Tensor | None,
    position_ids: torch.Tensor | None,
) -> dict[str, object]:
    """The keywords for `encoder`'s forward. Position ids are passed where the forward takes
    them; a decoder with absolute position embeddings (GPT-2) given none counts them from the
    mask (`positions_from_mask`), so left and right padding give the same logits."""
    kwargs: dict[str, object] = {"input_ids": input_ids, "attention_mask": attention_mask}
    if token_type_ids is not None and takes(encoder, "token_type_ids"):
        kwargs["token_type_ids"] = token_type_ids
    if position_ids is None and attention_mask is not None and _counts_positions(encoder):
        position_ids = positions_from_mask(attention_mask)
    if position_ids is not None:
        if not takes(encoder, "position_ids"):
            model_type = getattr(encoder.config, "model_type", type(encoder).__name__)
            raise TypeError(f"the base model ({model_type}) takes no position_ids")
        kwargs["position_ids"] = position_ids
    if takes(encoder, "use_cache"):  # a decoder builds a key/value cache unasked
        kwargs["use_cache"] = False
    return kwargs
