"""Translating head configs between the reference's JSON and ours.

Importing refuses, in one line naming the field, every head the reference computes differently
from ours; exporting refuses what the reference's head on the same model cannot compute.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from adapterfleet.adapters.heads import HeadConfig
from adapterfleet.interop import reference as ref
from adapterfleet.interop.reference import InteropError


def check_head(raw: object, where: str) -> Mapping[str, Any]:
    """The reference's head config, refused unless it is the classification head we have."""
    if not isinstance(raw, Mapping):
        raise InteropError(f"{where}: config must be a JSON object, got {raw!r}")
    for key, wanted in ref.CLASSIFICATION_HEAD.items():
        if raw.get(key, wanted) != wanted:
            raise InteropError(
                f"{where}: config.{key}={raw[key]!r} is not supported; adapterfleet imports "
                f"classification heads with {key}={wanted!r}"
            )
    num_labels = raw.get("num_labels")
    if not isinstance(num_labels, int) or num_labels < 2:
        raise InteropError(
            f"{where}: config.num_labels={num_labels!r} is not supported; adapterfleet imports "
            "classification heads with 2 or more labels (not regression)"
        )
    return raw


def head_from_reference(
    raw: object, default_dropout: float, where: str, pooling: str = "cls"
) -> HeadConfig:
    """Our head for the reference's classification head; `default_dropout` is what the reference
    uses when the head records none (the model's classifier or hidden dropout), `pooling` what
    its model class pools (the first token; a decoder's last real token)."""
    head = check_head(raw, where)
    dropout = head.get("dropout_prob")
    return HeadConfig(
        head_type="classification",
        num_labels=head["num_labels"],
        label_names=_label_names(head, head["num_labels"]),
        dropout=default_dropout if dropout is None else float(dropout),
        pooling=pooling,
    )


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


def head_to_reference(config: HeadConfig, where: str, pooling: str = "cls") -> dict[str, Any]:
    """The reference's config of our head; its model class pools `pooling`, so ours must."""
    if config.head_type != "classification":
        raise InteropError(
            f"{where}: head_type {config.head_type!r} cannot be exported; adapterfleet exports "
            "classification heads"
        )
    if config.pooling != pooling:
        raise InteropError(
            f"{where}: a head pooling {config.pooling!r} cannot be exported; the reference's "
            f"classification head on this model pools {pooling!r}; export the adapter alone"
        )
    labels = config.label_names or [f"LABEL_{i}" for i in range(config.num_labels)]
    return {
        **ref.CLASSIFICATION_HEAD,
        "num_labels": config.num_labels,
        "label2id": {label: i for i, label in enumerate(labels)},
        "dropout_prob": config.dropout,
    }
