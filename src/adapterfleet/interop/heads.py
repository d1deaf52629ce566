"""Translating heads between the reference's JSON and ours: classification, regression and
multiple choice.

The reference's `ClassificationHead` with 2 or more labels is our classification head; with one
label it is its regression head (mean squared error, no range), ours without a `value_range`. Its
`MultipleChoiceHead` (`num_choices`, one score per choice) is ours. Each is two tanh layers on
the first token (a decoder's last real token), as ours are. A regression head with a
`value_range` gives `low + width * (W x + b)`; the reference's has no range, so an export folds
it into the last layer, `(width W) x + (width b + low)`: the same numbers in the labels' units.
Importing that file gives a regression head without a range that computes them.

Importing refuses, in one line naming the field, every head the reference computes differently
from ours; exporting refuses what the reference's head on the same model cannot compute.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from adapterfleet.adapters.architectures import base_encoder
from adapterfleet.adapters.heads import HeadConfig
from adapterfleet.interop import reference as ref
from adapterfleet.interop.reference import InteropError, Layout

LAST_LAYER = 4  # index of the last Linear in both sides' Sequential: dropout, linear, tanh, ...
NO_HEAD = "export the adapter or fusion alone (--no-head)"


def check_head(raw: object, where: str) -> Mapping[str, Any]:
    """The reference's head config, refused unless it is one of the heads we have."""
    if not isinstance(raw, Mapping):
        raise InteropError(f"{where}: config must be a JSON object, got {raw!r}")
    head_type = raw.get("head_type", "classification")
    if head_type == "multiple_choice":
        _check_fields(raw, ref.MULTIPLE_CHOICE_HEAD, "multiple-choice", where)
        _check_count(raw, "num_choices", 2, "multiple-choice heads with 2 or more choices", where)
        return raw
    if head_type != "classification":
        raise InteropError(
            f"{where}: config.head_type={head_type!r} is not supported; adapterfleet imports "
            "'classification' heads (num_labels 1: regression) and 'multiple_choice' heads"
        )
    _check_fields(raw, ref.CLASSIFICATION_HEAD, "classification", where)
    _check_count(
        raw, "num_labels", 1, "classification heads with 1 label (regression) or more", where
    )
    return raw


def _check_fields(raw: Mapping[str, Any], wanted: Mapping[str, Any], kind: str, where: str) -> None:
    for key, value in wanted.items():
        if raw.get(key, value) != value:
            raise InteropError(
                f"{where}: config.{key}={raw[key]!r} is not supported; adapterfleet imports "
                f"{kind} heads with {key}={value!r}"
            )


def _check_count(raw: Mapping[str, Any], key: str, least: int, heads: str, where: str) -> None:
    count = raw.get(key)
    if isinstance(count, bool) or not isinstance(count, int) or count < least:
        raise InteropError(
            f"{where}: config.{key}={count!r} is not supported; adapterfleet imports {heads}"
        )


def head_from_reference(
    raw: object, default_dropout: float, where: str, pooling: str = "cls"
) -> HeadConfig:
    """Our head for the reference's; `default_dropout` is what the reference uses when the head
    records none (the model's classifier or hidden dropout), `pooling` what its model class pools
    (the first token; a decoder's last real token)."""
    head = check_head(raw, where)
    dropout = head.get("dropout_prob")
    shared = {"dropout": default_dropout if dropout is None else float(dropout), "pooling": pooling}
    if head.get("head_type") == "multiple_choice":
        choices = head["num_choices"]
        names = _label_names(head, choices)
        made_up = [f"LABEL_{i}" for i in range(choices)]  # the reference's, when none were given
        return HeadConfig("multiple_choice", choices, [] if names == made_up else names, **shared)
    if head["num_labels"] == 1:
        return HeadConfig("regression", 1, **shared)
    labels = _label_names(head, head["num_labels"])
    return HeadConfig("classification", head["num_labels"], labels, **shared)


def _label_names(raw: Mapping[str, Any], num_labels: int) -> list[str]:
    label2id = raw.get("label2id")
    if not isinstance(label2id, Mapping):
        id2label = raw.get("id2label")
        if not isinstance(id2label, Mapping):
            return []
        label2id = {label: id_ for id_, label in id2label.items()}
    try:
        by_id = {int(id_): str(label) for label, id_ in label2id.items()}
    except (TypeError, ValueError):
        return []
    if sorted(by_id) != list(range(num_labels)):
        return []
    return [by_id[i] for i in range(num_labels)]


def reference_head_dropout(model: nn.Module) -> float:
    """The rate the reference gives a head that records none: the classifier's, else hidden."""
    config = base_encoder(model).config
    for attr in ("classifier_dropout", "hidden_dropout_prob"):
        value = getattr(config, attr, None)
        if value is not None:
            return float(value)
    return 0.0


def head_to_reference(
    config: HeadConfig, where: str, pooling: str = "cls", layout: Layout | None = None
) -> dict[str, Any]:
    """The reference's config of our head on the model class of `layout` (None: one with a
    multiple-choice head), which pools `pooling`, so ours must. A regression head is the
    reference's classification head with one label (its range: `head_tensors_to_reference`)."""
    if config.pooling != pooling:
        raise InteropError(
            f"{where}: a head pooling {config.pooling!r} cannot be exported; the reference's "
            f"heads on this model pool {pooling!r}; {NO_HEAD}"
        )
    labels = config.label_names or [f"LABEL_{i}" for i in range(config.num_labels)]
    common = {
        "label2id": {label: i for i, label in enumerate(labels)},
        "dropout_prob": config.dropout,
    }
    if config.head_type != "multiple_choice":
        return {**ref.CLASSIFICATION_HEAD, "num_labels": config.num_labels, **common}
    if layout is not None and not layout.multiple_choice:
        raise InteropError(
            f"{where}: a multiple-choice head cannot be exported on this model: the reference's "
            f"{layout.model_class} has no multiple-choice head; {NO_HEAD}"
        )
    return {**ref.MULTIPLE_CHOICE_HEAD, "num_choices": config.num_labels, **common}


def head_tensors_to_reference(
    config: HeadConfig, tensors: dict[str, torch.Tensor], name: str, where: str
) -> dict[str, torch.Tensor]:
    """The head's tensors (named as the reference names them, head `name`) for the reference to
    compute what ours does: a regression head's `value_range` folded into its last layer."""
    if config.head_type != "regression" or config.value_range is None:
        return tensors
    low, width = config.regression_scale
    weight, bias = (ref.head_key(name, f"{LAST_LAYER}.{kind}") for kind in ("weight", "bias"))
    folded = {
        weight: (tensors[weight].double() * width).to(tensors[weight].dtype),
        bias: (tensors[bias].double() * width + low).to(tensors[bias].dtype),
    }
    if not all(bool(torch.isfinite(t).all()) for t in folded.values()):
        raise InteropError(
            f"{where}: value_range {config.value_range} cannot be folded into the last layer of "
            f"the head (the reference's regression head has no range): its weights times "
            f"{width:g} overflow {tensors[weight].dtype}; {NO_HEAD}"
        )
    return {**tensors, **folded}
