"""Adding, activating and training named adapters inside a Hugging Face encoder."""

from __future__ import annotations

import os
import re
import warnings
from collections.abc import Iterator
from pathlib import Path

import torch
from torch import nn

from adapterfleet.adapters.architectures import (
    SlotMap,
    base_encoder,
    encoder_layers,
    slot_map_for,
)
from adapterfleet.adapters.config import AdapterConfig
from adapterfleet.adapters.modules import (
    Bottleneck,
    MixSlot,
    NormSlot,
    OutputSlot,
    PreNormSlot,
    ReadingSlot,
    ResidualTap,
)

_NAME = re.compile(r"^[A-Za-z0-9_\-]+$")
_CONFIGS_ATTR = "_adapterfleet_adapters"


def _set_submodule(root: nn.Module, path: str, module: nn.Module) -> None:
    parent_path, _, attr = path.rpartition(".")
    parent = root.get_submodule(parent_path) if parent_path else root
    setattr(parent, attr, module)


def _wrap(layer: nn.Module, path: str, kind: type[nn.Module]) -> nn.Module:
    """The `kind` wrapper at `path` in `layer`, created around the original module on first use."""
    current = layer.get_submodule(path)
    if isinstance(current, kind):
        return current
    if kind in (PreNormSlot, ReadingSlot):
        raise AssertionError("tapping slots are made by _slot")
    wrapper = kind(current).train(current.training)
    _set_submodule(layer, path, wrapper)
    return wrapper


def _slot(layer: nn.Module, path: str, kind: type[nn.Module], slots: SlotMap) -> nn.Module:
    """The slot at `path`; a pre-norm Pfeiffer slot taps the feed-forward norm's input, an ALBERT
    attention slot the attention's input."""
    if kind not in (PreNormSlot, ReadingSlot):
        return _wrap(layer, path, kind)
    current = layer.get_submodule(path)
    if isinstance(current, kind):
        return current
    if kind is PreNormSlot:
        slot = PreNormSlot(current, _wrap(layer, slots.ffn_norm, ResidualTap))
    else:
        slot = ReadingSlot(current, _wrap(layer, slots.attention_adapter_input, ResidualTap))
    slot.train(current.training)
    _set_submodule(layer, path, slot)
    return slot


def _slot_paths(model: nn.Module, config: AdapterConfig) -> dict[str, tuple[str, type]]:
    slots = slot_map_for(model)
    if config.architecture == "pfeiffer":
        if slots.pre_norm:
            return {"output_adapter": (slots.ffn_output, PreNormSlot)}
        return {"output_adapter": (slots.ffn_norm, NormSlot)}
    return {
        "mh_adapter": (
            slots.attention_output,
            ReadingSlot if slots.attention_adapter_input else OutputSlot,
        ),
        "output_adapter": (slots.ffn_output, OutputSlot),
    }


def check_name(kind: str, name: str) -> None:
    """Refuse a name of an adapter, fusion or head that cannot be a module's name (a '.')."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise ValueError(f"{kind} name {name!r} must use letters, digits, '_' or '-' only")


def trainable_dtype(reference: torch.Tensor) -> torch.dtype:
    """Adapters, fusions and heads train in float32 beside a half-precision base."""
    return torch.float32 if reference.dtype in (torch.bfloat16, torch.float16) else reference.dtype


def adapter_configs(model: nn.Module) -> dict[str, AdapterConfig]:
    """The adapters present in `model`, by name."""
    encoder = base_encoder(model)
    if not hasattr(encoder, _CONFIGS_ATTR):
        setattr(encoder, _CONFIGS_ATTR, {})
    return getattr(encoder, _CONFIGS_ATTR)


def add_adapter(model: nn.Module, name: str, config: AdapterConfig | None = None) -> None:
    """Insert a fresh adapter called `name` into every layer of `model` (near-identity init)."""
    config = config or AdapterConfig()
    check_name("adapter", name)
    configs = adapter_configs(model)
    if name in configs:
        raise ValueError(f"adapter {name!r} already exists in this model")
    hidden = int(base_encoder(model).config.hidden_size)
    width = config.bottleneck_size(hidden)
    slots = slot_map_for(model)
    others = {c.architecture for c in configs.values()} - {config.architecture}
    if slots.pre_norm and others:
        raise ValueError(
            f"adapter {name!r} is {config.architecture}, but this pre-norm model already carries "
            f"{others.pop()} adapters; one pre-norm model holds adapters of one placement"
        )
    for layer in encoder_layers(model):
        ref = next(layer.parameters(), None)
        for path, kind in _slot_paths(model, config).values():
            bottleneck = Bottleneck(hidden, width, config.non_linearity, config.init_std)
            if ref is not None:
                bottleneck.to(device=ref.device, dtype=trainable_dtype(ref))
            slot = _slot(layer, path, kind, slots)
            slot.adapters[name] = bottleneck.train(slot.training)
    configs[name] = config


def delete_adapter(model: nn.Module, name: str) -> None:
    """Remove adapter `name` from every layer. An adapter a fusion still mixes is refused
    (delete the fusion first); a name the model does not hold is skipped without a word, as
    AdapterHub's `delete_adapter` does."""
    users = sorted({f for _, _, slot in _iter_slots(model) for f in _fusions_using(slot, name)})
    if users:
        raise ValueError(
            f"adapter {name!r} is used by fusion {users[0]!r}; delete the fusion first "
            f"(delete_fusion(model, {users[0]!r}))"
        )
    for _, _, slot in _iter_slots(model):
        if name in slot.adapters:
            del slot.adapters[name]
            if slot.active_adapter == name:
                slot.active_adapter = None
    adapter_configs(model).pop(name, None)


def _fusions_using(slot: nn.Module, name: str) -> list[str]:
    fusions = getattr(slot, "fusions", {})  # a MixSlot's fusion layers name what they mix
    return [f for f, layer in fusions.items() if name in getattr(layer, "adapter_names", ())]


def _iter_slots(model: nn.Module) -> Iterator[tuple[int, str, MixSlot | OutputSlot]]:
    for index, layer in enumerate(encoder_layers(model)):
        for path, module in layer.named_modules():
            if isinstance(module, MixSlot | OutputSlot):
                yield index, path, module


def adapter_modules(model: nn.Module, name: str) -> list[tuple[int, str, Bottleneck]]:
    """(layer index, position, module) of adapter `name`, in layer order."""
    config = adapter_config(model, name)
    positions = {path: position for position, (path, _) in _slot_paths(model, config).items()}
    found = []
    for index, path, slot in _iter_slots(model):
        if name in slot.adapters and path in positions:
            found.append((index, positions[path], slot.adapters[name]))
    return found


def adapter_config(model: nn.Module, name: str) -> AdapterConfig:
    """The config of adapter `name`; a KeyError naming the adapters present when it is absent."""
    configs = adapter_configs(model)
    if name not in configs:
        known = ", ".join(sorted(configs)) or "none"
        raise KeyError(f"adapter {name!r} is not in this model (adapters present: {known})")
    return configs[name]


def adapter_parameters(model: nn.Module, name: str) -> list[nn.Parameter]:
    """The parameters of adapter `name`, found through its modules (never by parameter name)."""
    return [p for _, _, module in adapter_modules(model, name) for p in module.parameters()]


def set_active_adapter(model: nn.Module, name: str | None) -> None:
    """Route every layer through adapter `name` (None: the plain base model)."""
    if name is not None:
        adapter_config(model, name)
    for _, _, slot in _iter_slots(model):
        slot.active_adapter = name
        if isinstance(slot, MixSlot):
            slot.active_fusion = None


def freeze(model: nn.Module) -> None:
    for parameter in model.parameters():
        parameter.requires_grad_(False)


def train_only(model: nn.Module, params: list[nn.Parameter], head: str) -> list[nn.Parameter]:
    """Freeze `model`, then make `params` and the head called `head` (if the model has one, which
    also becomes the active head) trainable. Returns the trainable parameters. Where the model
    has no head `head` but another head is active, that one stays frozen: a UserWarning says so."""
    freeze(model)
    trainable = list(params)
    select_head = getattr(model, "select_head", None)
    if select_head is not None and head in getattr(model, "heads", {}):
        trainable += select_head(head)
    elif getattr(model, "active_head", None) is not None:
        warnings.warn(
            f"the active head {model.active_head!r} stays frozen: it is not {head!r}'s (the model "
            f"has no head {head!r}); add one (add_head({head!r}, HeadConfig(...))) to train it "
            "with the rest",
            UserWarning,
            stacklevel=3,
        )
    for parameter in trainable:
        parameter.requires_grad_(True)
    return trainable


def train_adapter(model: nn.Module, name: str) -> list[nn.Parameter]:
    """Activate adapter `name` and make it (and the task head of that name, if any) the only
    trainable parameters. Returns them."""
    set_active_adapter(model, name)
    return train_only(model, adapter_parameters(model, name), name)


def base_state_dict(model: nn.Module) -> dict[str, torch.Tensor]:
    """The encoder's own weights under their original names, without any adapter or fusion."""
    encoder = base_encoder(model)
    wrappers = {}
    for path, module in encoder.named_modules():
        if isinstance(module, NormSlot):
            wrappers[path] = "layer_norm"
        elif isinstance(module, OutputSlot | PreNormSlot | ResidualTap):
            wrappers[path] = "inner"
    state = {}
    for key, tensor in encoder.state_dict().items():
        for path, inner in wrappers.items():
            if key.startswith(f"{path}."):
                rest = key[len(path) + 1 :]
                if not rest.startswith(f"{inner}."):
                    key = None  # an adapter's or a fusion's weight
                    break
                key = f"{path}.{rest[len(inner) + 1 :]}"
                break
        if key is not None:
            state[key] = tensor
    return state


def save_base_model(model: nn.Module, directory: str | os.PathLike[str]) -> Path:
    """Save the (fine-tuned) encoder so `AutoModel.from_pretrained(directory)` loads it."""
    from safetensors.torch import save_file

    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    encoder = base_encoder(model)
    encoder.config.save_pretrained(out)
    tensors = {k: t.detach().cpu().contiguous() for k, t in base_state_dict(model).items()}
    save_file(tensors, out / "model.safetensors", metadata={"format": "pt"})
    return out
