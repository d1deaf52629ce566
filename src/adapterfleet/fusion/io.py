"""Fusion layer files: `adapter_fusion_config.json` + `model_adapter_fusion.safetensors`."""

from __future__ import annotations

import os
from pathlib import Path

import torch
from torch import nn

from adapterfleet.adapters.architectures import describe_base
from adapterfleet.adapters.files import (
    WeightsFileError,
    check_base,
    fill_or_remove,
    read_config,
    write_weights,
)
from adapterfleet.fusion.config import FusionConfig
from adapterfleet.fusion.model import (
    add_fusion,
    delete_fusion,
    fusion_layers,
    fusion_setup,
    set_active_fusion,
)

FUSION_CONFIG = "adapter_fusion_config.json"
FUSION_WEIGHTS = "model_adapter_fusion.safetensors"


def _fusion_tensors(model: nn.Module, name: str) -> dict[str, torch.Tensor]:
    return {
        f"layers.{index}.{key}": tensor
        for index, layer in enumerate(fusion_layers(model, name))
        for key, tensor in layer.state_dict().items()
    }


def save_fusion(model: nn.Module, name: str, directory: str | os.PathLike[str]) -> Path:
    setup = fusion_setup(model, name)
    config = {
        "name": name,
        "adapters": list(setup.adapter_names),
        "config": setup.config.to_dict(),
        "base_model": describe_base(model),
    }
    return write_weights(
        directory, FUSION_CONFIG, config, FUSION_WEIGHTS, _fusion_tensors(model, name)
    )


def read_fusion_config(
    directory: str | os.PathLike[str],
) -> tuple[str, list[str], FusionConfig, dict]:
    raw = read_config(directory, FUSION_CONFIG)
    try:
        config = FusionConfig.from_dict(raw["config"])
        return (
            str(raw["name"]),
            [str(a) for a in raw["adapters"]],
            config,
            raw.get("base_model", {}),
        )
    except (KeyError, TypeError, ValueError) as error:
        raise WeightsFileError(f"{Path(directory) / FUSION_CONFIG}: {error}") from None


def load_fusion(
    model: nn.Module,
    directory: str | os.PathLike[str],
    name: str | None = None,
    sha256: str | None = None,
    *,
    set_active: bool = False,
) -> str:
    """Add the fusion saved in `directory`; the adapters it fuses must already be in `model`.
    The fusion is not activated unless `set_active` (AdapterHub's default and keyword): until
    then the model computes without it, a notebook's predictions silently the base's.
    `set_active_fusion(model, name)` routes the layers through it, `train_fusion(model, name)`
    also makes it train. Returns its name in the model."""
    saved_name, adapters, config, base = read_fusion_config(directory)
    check_base(base, model, str(directory))
    name = name or saved_name
    try:
        add_fusion(model, name, adapters, config)
    except ValueError as error:
        raise WeightsFileError(f"{directory}: {error}") from None
    fill_or_remove(
        directory,
        FUSION_WEIGHTS,
        lambda: _fusion_tensors(model, name),
        lambda: delete_fusion(model, name),
        sha256,
    )
    if set_active:
        set_active_fusion(model, name)
    return name
