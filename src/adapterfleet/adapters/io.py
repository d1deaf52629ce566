"""Saving and loading adapters and heads: `adapter_config.json` + `adapter.safetensors`,
`head_config.json` + `model_head.safetensors`. Only these weights are written, never the base."""

from __future__ import annotations

import os
from pathlib import Path

import torch
from torch import nn

from adapterfleet.adapters.architectures import describe_base
from adapterfleet.adapters.config import AdapterConfig
from adapterfleet.adapters.files import (
    WeightsFileError,
    check_base,
    fill_or_remove,
    read_config,
    write_weights,
)
from adapterfleet.adapters.heads import HeadConfig
from adapterfleet.adapters.model import (
    adapter_config,
    adapter_modules,
    add_adapter,
    delete_adapter,
    set_active_adapter,
)

ADAPTER_CONFIG = "adapter_config.json"
ADAPTER_WEIGHTS = "adapter.safetensors"
HEAD_CONFIG = "head_config.json"
HEAD_WEIGHTS = "model_head.safetensors"


def _adapter_tensors(model: nn.Module, name: str) -> dict[str, torch.Tensor]:
    return {
        f"layers.{index}.{position}.{key}": tensor
        for index, position, module in adapter_modules(model, name)
        for key, tensor in module.state_dict().items()
    }


def save_adapter(model: nn.Module, name: str, directory: str | os.PathLike[str]) -> Path:
    """Write adapter `name` (and nothing of the base model) to `directory`."""
    config = {
        "name": name,
        "config": adapter_config(model, name).to_dict(),
        "base_model": describe_base(model),
    }
    return write_weights(
        directory, ADAPTER_CONFIG, config, ADAPTER_WEIGHTS, _adapter_tensors(model, name)
    )


def read_adapter_config(directory: str | os.PathLike[str]) -> tuple[str, AdapterConfig, dict]:
    raw = read_config(directory, ADAPTER_CONFIG)
    try:
        config = AdapterConfig.from_dict(raw["config"])
        return str(raw["name"]), config, dict(raw.get("base_model", {}))
    except (KeyError, TypeError, ValueError) as error:
        raise WeightsFileError(f"{Path(directory) / ADAPTER_CONFIG}: {error}") from None


def load_adapter(
    model: nn.Module,
    directory: str | os.PathLike[str],
    name: str | None = None,
    sha256: str | None = None,
    *,
    set_active: bool = False,
) -> str:
    """Add the adapter saved in `directory` to `model` (as `name`, default its saved name).

    Checks the base model it was trained on, every key and shape, and `sha256` when given; on any
    mismatch the model is left as it was. Returns the adapter's name in the model. The adapter
    is not activated unless `set_active` (AdapterHub's default and keyword): until then the
    model computes without it; `set_active_adapter(model, name)` routes the layers through it,
    `train_adapter(model, name)` also makes it train.
    """
    saved_name, config, base = read_adapter_config(directory)
    check_base(base, model, str(directory))
    name = name or saved_name
    add_adapter(model, name, config)
    fill_or_remove(
        directory,
        ADAPTER_WEIGHTS,
        lambda: _adapter_tensors(model, name),
        lambda: delete_adapter(model, name),
        sha256,
    )
    if set_active:
        set_active_adapter(model, name)
    return name


def save_head(model: nn.Module, name: str, directory: str | os.PathLike[str]) -> Path:
    head = model.head(name)
    config = {"name": name, "config": head.config.to_dict(), "base_model": describe_base(model)}
    return write_weights(directory, HEAD_CONFIG, config, HEAD_WEIGHTS, head.state_dict())


def load_head(
    model: nn.Module,
    directory: str | os.PathLike[str],
    name: str | None = None,
    sha256: str | None = None,
) -> str:
    """Add the head saved in `directory` to `model` (as `name`, default its saved name), checked
    as `load_adapter` checks an adapter. Like `add_head`, it becomes the active head only when
    the model had none (AdapterHub's `load_head` always activates it); `model.select_head(name)`
    activates it. Returns its name in the model."""
    raw = read_config(directory, HEAD_CONFIG)
    try:
        config = HeadConfig(**raw["config"])
    except (KeyError, TypeError, ValueError) as error:
        raise WeightsFileError(f"{Path(directory) / HEAD_CONFIG}: {error}") from None
    check_base(raw.get("base_model", {}), model, str(directory))
    name = name or str(raw["name"])
    head = model.add_head(name, config)
    fill_or_remove(
        directory,
        HEAD_WEIGHTS,
        lambda: head.state_dict(keep_vars=True),
        lambda: model.heads.pop(name),
        sha256,
    )
    return name
