"""Adding, activating and training AdapterFusion layers over adapters already in the model."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch
from torch import nn

from adapterfleet.adapters.architectures import attention_dropout, base_encoder, encoder_layers
from adapterfleet.adapters.first_token import every_position
from adapterfleet.adapters.model import adapter_configs, check_name, train_only
from adapterfleet.adapters.modules import MixSlot, OutputSlot
from adapterfleet.fusion.config import FusionConfig
from adapterfleet.fusion.layer import FusionLayer

_FUSIONS_ATTR = "_adapterfleet_fusions"


@dataclass(frozen=True)
class FusionSetup:
    adapter_names: tuple[str, ...]
    config: FusionConfig


def fusion_setups(model: nn.Module) -> dict[str, FusionSetup]:
    encoder = base_encoder(model)
    if not hasattr(encoder, _FUSIONS_ATTR):
        setattr(encoder, _FUSIONS_ATTR, {})
    return getattr(encoder, _FUSIONS_ATTR)


def _norm_slots(model: nn.Module) -> list[MixSlot]:
    slots = []
    for layer in encoder_layers(model):
        found = [m for m in layer.modules() if isinstance(m, MixSlot)]
        if not found:
            raise ValueError("fusion needs pfeiffer adapters in the model; add or load them first")
        slots.append(found[0])
    return slots


def add_fusion(
    model: nn.Module, name: str, adapter_names: list[str], config: FusionConfig | None = None
) -> None:
    """Add a fusion layer `name` to every layer, mixing the (frozen) adapters `adapter_names`."""
    config = config or FusionConfig()
    if isinstance(adapter_names, str):
        raise TypeError(
            f"fusion {name!r}: adapter_names must be a list of adapter names, not the string "
            f"{adapter_names!r}; give a list, e.g. {[adapter_names]!r}"
        )
    check_name("fusion", name)
    if name in fusion_setups(model):
        raise ValueError(f"fusion {name!r} already exists in this model")
    if len(adapter_names) < 1 or len(set(adapter_names)) != len(adapter_names):
        raise ValueError(f"fusion {name!r} needs distinct adapter names, got {adapter_names}")
    configs = adapter_configs(model)
    missing = [a for a in adapter_names if a not in configs]
    if missing:
        raise ValueError(
            f"fusion {name!r}: adapters {missing} are not in the model; add each of them "
            "(load_adapter of its folder) before the fusion"
        )
    wrong = [a for a in adapter_names if configs[a].architecture != "pfeiffer"]
    if wrong:
        raise ValueError(f"fusion {name!r}: adapters {wrong} are not pfeiffer adapters")
    hidden = int(base_encoder(model).config.hidden_size)
    for slot in _norm_slots(model):
        layer = FusionLayer(hidden, adapter_names, config, attention_dropout(model))
        ref = slot.adapters[adapter_names[0]].adapter_down.weight
        slot.fusions[name] = layer.to(device=ref.device, dtype=ref.dtype).train(slot.training)
    fusion_setups(model)[name] = FusionSetup(tuple(adapter_names), config)


def delete_fusion(model: nn.Module, name: str) -> None:
    for slot in _norm_slots(model):
        if name in slot.fusions:
            del slot.fusions[name]
        if slot.active_fusion == name:
            slot.active_fusion = None
    fusion_setups(model).pop(name, None)


def fusion_setup(model: nn.Module, name: str) -> FusionSetup:
    """Fusion `name`'s adapters and config; a KeyError naming the fusions present when absent."""
    setups = fusion_setups(model)
    if name not in setups:
        known = ", ".join(setups) or "none"
        raise KeyError(f"fusion {name!r} is not in this model (fusions present: {known})")
    return setups[name]


def fusion_layers(model: nn.Module, name: str) -> list[FusionLayer]:
    fusion_setup(model, name)
    return [slot.fusions[name] for slot in _norm_slots(model)]


def fusion_parameters(model: nn.Module, name: str) -> list[nn.Parameter]:
    """The parameters of fusion `name` (Q, K, V of every layer), found through its modules."""
    return [p for layer in fusion_layers(model, name) for p in layer.parameters()]


def set_active_fusion(model: nn.Module, name: str) -> None:
    fusion_layers(model, name)
    for layer in encoder_layers(model):
        for module in layer.modules():
            if isinstance(module, MixSlot):
                module.active_fusion = name
            if isinstance(module, OutputSlot):
                module.active_adapter = None


@contextmanager
def fusion_active(model: nn.Module, name: str) -> Iterator[None]:
    """Fusion `name` active inside the block; whatever adapter or fusion each layer had active
    before is active again after it."""
    slots = [m for layer in encoder_layers(model) for m in layer.modules()]
    slots = [m for m in slots if isinstance(m, MixSlot | OutputSlot)]
    before = [(slot.active_adapter, getattr(slot, "active_fusion", None)) for slot in slots]
    set_active_fusion(model, name)
    try:
        yield
    finally:
        for slot, (adapter, fusion) in zip(slots, before, strict=True):
            slot.active_adapter = adapter
            if isinstance(slot, MixSlot):
                slot.active_fusion = fusion


def train_fusion(model: nn.Module, name: str) -> list[nn.Parameter]:
    """Activate fusion `name`; only its parameters and the head of that name stay trainable."""
    set_active_fusion(model, name)
    return train_only(model, fusion_parameters(model, name), name)


def fusion_regularization_loss(model: nn.Module, name: str) -> torch.Tensor | None:
    """Σ over layers of λ‖I − V‖², the term the training loop adds to the task loss."""
    terms = [
        t for layer in fusion_layers(model, name) if (t := layer.regularization_loss()) is not None
    ]
    return torch.stack(terms).sum() if terms else None


@contextmanager
def capture_fusion_weights(model: nn.Module, name: str) -> Iterator[dict[int, list[torch.Tensor]]]:
    """Collect each layer's fusion weights (…, N) from every forward pass inside the block, at
    every position of every layer (the last one included: `every_position`)."""
    layers = fusion_layers(model, name)
    captured: dict[int, list[torch.Tensor]] = {i: [] for i in range(len(layers))}
    handles = []
    for index, layer in enumerate(layers):
        layer.record = True

        def hook(module: FusionLayer, _args: object, _out: object, index: int = index) -> None:
            captured[index].append(module.last_weights)

        handles.append(layer.register_forward_hook(hook))
    try:
        with every_position(model):
            yield captured
    finally:
        for layer, handle in zip(layers, handles, strict=True):
            layer.record = False
            layer.last_weights = None
            handle.remove()
