"""Import from and export to AdapterHub `adapters` 1.x, the reference implementation.

`import_adapterhub` converts what the reference saved into a directory (`save_adapter`,
`save_adapter_fusion`, `save_head`) into adapterfleet's files; `export_adapterhub` writes the
reference's files for what adapterfleet saved. Both go through a live model of the base encoder:
import fills our modules with the reference's tensors and saves them with `adapters/io.py` and
`fusion/io.py`; export loads ours with the normal loaders (base, shape and hash checks) and
writes their tensors under the reference's names. Nothing is written until every part converted.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from adapterfleet._hub import hub_unreachable
from adapterfleet.adapters import (
    AdapterConfig,
    AdapterModel,
    BaseModelError,
    adapter_configs,
    adapter_modules,
    add_adapter,
    delete_adapter,
    load_adapter,
    load_encoder,
    load_head,
    save_adapter,
    save_head,
)
from adapterfleet.adapters.architectures import base_encoder, describe_base
from adapterfleet.adapters.base_model import public_name
from adapterfleet.fusion import (
    add_fusion,
    delete_fusion,
    fusion_layers,
    fusion_setups,
    load_fusion,
    read_fusion_config,
    save_fusion,
)
from adapterfleet.interop import configs
from adapterfleet.interop import reference as ref
from adapterfleet.interop.bases import check_reference_base, reference_pooling
from adapterfleet.interop.folders import (
    OUR_NAMES,
    REFERENCE_NAMES,
    Saved,
    Tensors,
    check_out,
    check_saved_names,
    first_line,
    our_base,
    our_folders,
    read_reference_dir,
    reference_base,
    write_reference,
)
from adapterfleet.interop.heads import (
    check_head,
    head_from_reference,
    head_tensors_to_reference,
    head_to_reference,
    reference_head_dropout,
)
from adapterfleet.interop.reference import InteropError, Layout


@dataclass(frozen=True)
class Converted:
    """What a conversion wrote into `directory`: the names of its adapter, head and fusion."""

    directory: Path
    adapter: str | None = None
    head: str | None = None
    fusion: str | None = None
    fused: tuple[str, ...] = ()


# --- import ----------------------------------------------------------------------------------


def import_adapterhub(
    src: str | Path,
    out: str | Path,
    base_model: str | nn.Module | None = None,
    *,
    name: str | None = None,
) -> Converted:
    """Convert the adapter, head and/or fusion the reference saved in `src` into `out`.

    `base_model` (a name or path for `load_encoder`, or a loaded encoder) defaults to the
    `model_name` the reference recorded. `name` renames what is imported (default: the saved
    names; a fusion takes its head's name, else its adapters' names joined by `_`). Refuses, in
    one line naming the field, any setting adapterfleet does not implement.
    """
    src, out = Path(src), Path(out)
    check_out(src, out, OUR_NAMES)
    parts = read_reference_dir(src)
    planned = _translate(parts)  # every refusal of a setting, before a base model is loaded
    check_saved_names(parts, name)
    base = base_model if base_model is not None else reference_base(parts.values(), src)
    with _working_model(base) as model:
        layout = _layout_of(model)
        for saved in parts.values():
            check_reference_base(saved, model, layout)
        names: dict[str, Any] = {}
        if "adapter" in parts:
            names["adapter"] = _import_adapter(model, layout, parts["adapter"], planned, name)
        if "head" in parts:
            names["head"] = _import_head(model, parts["head"], name)
        if "fusion" in parts:
            fusion_name = name or names.get("head")
            names["fusion"], names["fused"] = _import_fusion(
                model, layout, parts["fusion"], planned, fusion_name
            )
        _save_ours(model, names, out)
    return Converted(out, **names)


def _save_ours(model: AdapterModel, names: dict[str, Any], out: Path) -> None:
    if "adapter" in names:
        save_adapter(model, names["adapter"], out)
    if "head" in names:
        save_head(model, names["head"], out)
    if "fusion" in names:
        save_fusion(model, names["fusion"], out)


def _translate(parts: dict[str, Saved]) -> dict[str, Any]:
    """Our configs for the saved adapter and fusion; the head's fields checked (its dropout
    default comes from the base model)."""
    planned: dict[str, Any] = {}
    if "adapter" in parts:
        saved = parts["adapter"]
        hidden = saved.meta.get("hidden_size")
        planned["adapter"] = configs.adapter_from_reference(
            saved.meta.get("config"),
            hidden if isinstance(hidden, int) else None,
            saved.where,
            legacy="version" not in saved.meta,
        )
    if "fusion" in parts:
        saved = parts["fusion"]
        planned["fusion"] = configs.fusion_from_reference(saved.meta.get("config"), saved.where)
    if "head" in parts:
        check_head(parts["head"].meta.get("config"), parts["head"].where)
    return planned


def _import_adapter(
    model: nn.Module, layout: Layout, saved: Saved, planned: dict[str, Any], name: str | None
) -> str:
    name = name or saved.name
    _add(lambda: add_adapter(model, name, planned["adapter"]), saved.where)
    _fill(adapter_pairs(model, layout, name, saved.name), saved, layout)
    return name


def _import_head(model: AdapterModel, saved: Saved, name: str | None) -> str:
    config = head_from_reference(
        saved.meta.get("config"),
        reference_head_dropout(model),
        saved.where,
        reference_pooling(model),
    )
    name = name or saved.name
    _add(lambda: model.add_head(name, config), saved.where)
    _fill(head_pairs(model, name, saved.name), saved, None)
    return name


def _import_fusion(
    model: nn.Module, layout: Layout, saved: Saved, planned: dict[str, Any], name: str | None
) -> tuple[str, tuple[str, ...]]:
    fused = [str(a) for a in saved.meta.get("adapter_names") or saved.name.split(",")]
    name = name or "_".join(fused)
    _host_adapters(model, fused, saved.where)
    _add(lambda: add_fusion(model, name, fused, planned["fusion"]), saved.where)
    _fill(fusion_pairs(model, layout, name, saved.name), saved, layout)
    return name, tuple(fused)


def _fill(pairs: dict[str, nn.Parameter], saved: Saved, layout: Layout | None) -> None:
    """Copy the saved tensors into `pairs` (reference name -> our parameter); the names must
    match one to one and the shapes exactly."""
    given = {ref.normalized_key(k, layout) if layout else k: t for k, t in saved.tensors.items()}
    missing, extra = sorted(set(pairs) - set(given)), sorted(set(given) - set(pairs))
    if missing or extra:
        raise InteropError(
            f"{saved.where}: the weights file does not hold what the config describes: "
            f"{len(missing)} missing (e.g. {missing[:2]}), {len(extra)} unexpected "
            f"(e.g. {extra[:2]})"
        )
    for key, param in pairs.items():
        if given[key].shape != param.shape:
            raise InteropError(
                f"{saved.where}: {key} has shape {tuple(given[key].shape)}, "
                f"the base model needs {tuple(param.shape)}"
            )
    with torch.no_grad():
        for key, param in pairs.items():
            param.copy_(given[key])


# --- export ----------------------------------------------------------------------------------


def export_adapterhub(
    src: str | Path,
    out: str | Path,
    base_model: str | nn.Module | None = None,
    *,
    torch_bin: bool = False,
    head: bool = True,
) -> Converted:
    """Write the reference's files for the adapter, head and/or fusion adapterfleet saved in
    `src` (one directory, or a run folder with `adapter/`, `head/`, `fusion/`) into `out`;
    the adapter or fusion without its head when not `head`.

    The reference loads the result with `load_adapter(out, use_safetensors=True)`,
    `load_adapter_fusion(out, use_safetensors=True)` (its adapters loaded first) and
    `load_head(out, use_safetensors=True)`: weights go to the reference's safetensors file names
    only, unless `torch_bin` also writes the torch pickle files its loaders read by default
    (for readers that cannot take safetensors). `base_model` defaults to the one our files
    record.
    """
    src, out = Path(src), Path(out)
    check_out(src, out, REFERENCE_NAMES)
    folders = our_folders(src, head)
    base = base_model if base_model is not None else our_base(folders, src)
    names: dict[str, Any] = {}
    with _working_model(base) as model:
        layout = _layout_of(model)
        written: list[tuple[ref.Files, dict[str, Any], Tensors]] = []
        if "adapter" in folders:
            names["adapter"] = load_adapter(model, folders["adapter"])
            written.append(_export_adapter(model, layout, names["adapter"]))
        if "head" in folders:
            names["head"] = load_head(model, folders["head"])
            written.append(_export_head(model, names["head"], str(folders["head"])))
        if "fusion" in folders:
            _, fused, _, _ = read_fusion_config(folders["fusion"])
            _host_adapters(model, fused, str(folders["fusion"]))
            names["fusion"], names["fused"] = load_fusion(model, folders["fusion"]), tuple(fused)
            written.append(_export_fusion(model, layout, names["fusion"], str(folders["fusion"])))
        for files, meta, tensors in written:
            write_reference(out, files, meta, tensors, torch_bin)
    return Converted(out, **names)


def _export_adapter(
    model: nn.Module, layout: Layout, name: str
) -> tuple[ref.Files, dict[str, Any], Tensors]:
    config = configs.adapter_to_reference(adapter_configs(model)[name])
    meta = _reference_meta(model, layout, name, config)
    return ref.ADAPTER_FILES, meta, _detached(adapter_pairs(model, layout, name, name))


def _export_head(
    model: AdapterModel, name: str, where: str
) -> tuple[ref.Files, dict[str, Any], Tensors]:
    ours, layout = model.heads[name].config, _layout_of(model)
    config = head_to_reference(ours, where, reference_pooling(model), layout)
    tensors = head_tensors_to_reference(ours, _detached(head_pairs(model, name, name)), name, where)
    return ref.HEAD_FILES, _reference_meta(model, layout, name, config), tensors


def _export_fusion(
    model: nn.Module, layout: Layout, name: str, where: str
) -> tuple[ref.Files, dict[str, Any], Tensors]:
    setup = fusion_setups(model)[name]
    config = configs.fusion_to_reference(setup.config, where)
    fused = list(setup.adapter_names)
    ref_name = ref.fusion_name(fused)
    meta = {**_reference_meta(model, layout, ref_name, config), "adapter_names": fused}
    return ref.FUSION_FILES, meta, _detached(fusion_pairs(model, layout, name, ref_name))


def _reference_meta(
    model: nn.Module, layout: Layout, name: str, config: dict[str, Any]
) -> dict[str, Any]:
    """The keys the reference writes around a module's config (`build_full_config`)."""
    base = describe_base(model)
    return {
        "name": name,
        "config": config,
        "model_type": base["model_type"],
        "hidden_size": base["hidden_size"],
        "model_name": public_name(base["name_or_path"]),  # the hub id, not this machine's path
        "model_class": layout.model_class,
        "version": ref.VERSION_TAG,
    }


def _detached(pairs: dict[str, nn.Parameter]) -> Tensors:
    return {key: p.detach().to("cpu").contiguous() for key, p in pairs.items()}


# --- the two sides' parameters, matched by name ----------------------------------------------


def adapter_pairs(
    model: nn.Module, layout: Layout, name: str, ref_name: str
) -> dict[str, nn.Parameter]:
    """The reference's name for each parameter of our adapter `name` (saved there as
    `ref_name`)."""
    return {
        ref.adapter_key(layout, index, position, ref_name, key): param
        for index, position, module in adapter_modules(model, name)
        for key, param in module.state_dict(keep_vars=True).items()
    }


def fusion_pairs(
    model: nn.Module, layout: Layout, name: str, ref_name: str
) -> dict[str, nn.Parameter]:
    return {
        ref.fusion_key(layout, index, ref_name, key): param
        for index, layer in enumerate(fusion_layers(model, name))
        for key, param in layer.state_dict(keep_vars=True).items()
    }


def head_pairs(model: AdapterModel, name: str, ref_name: str) -> dict[str, nn.Parameter]:
    """Our head is `layers = Sequential(...)`; the reference's head is the Sequential itself."""
    return {
        ref.head_key(ref_name, key.split(".", 1)[1]): param
        for key, param in model.heads[name].state_dict(keep_vars=True).items()
    }


# --- base models, scratch models ------------------------------------------------


def _layout_of(model: nn.Module) -> Layout:
    return ref.layout_for(base_encoder(model).config.model_type, "the base model")


def _add(add: Callable[[], object], where: str) -> None:
    """Run an `add_*` call; its ValueError (a clash of names, a factor that does not divide)
    becomes a one-line InteropError."""
    try:
        add()
    except ValueError as error:
        raise InteropError(f"{where}: {error}") from None


def _host_adapters(model: nn.Module, names: list[str], where: str) -> None:
    """A fusion file holds only Q, K and V: stand-in adapters (width 1) let it be attached when
    the fused adapters themselves are not in the model."""
    hidden = int(base_encoder(model).config.hidden_size)
    for name in names:
        if name not in adapter_configs(model):
            _add(lambda n=name: add_adapter(model, n, AdapterConfig("pfeiffer", hidden)), where)


def _load_base(name: str) -> nn.Module:
    try:
        return load_encoder(name)
    except BaseModelError as error:
        found = str(error).removeprefix("base_model: ")
        raise InteropError(f"base model {found} (--base-model)") from None
    except (OSError, ValueError) as error:
        cause = first_line(error)
        if not os.path.exists(name) and (why := hub_unreachable()):  # a hub id, offline
            cause = f"{why}, and it is not in the Hugging Face cache"
        fix = "give --base-model a local folder of it, or a hub id in the cache (HF_HOME)"
        raise InteropError(f"cannot load the base model {name!r} ({cause}); {fix}") from None


@contextmanager
def _working_model(base: str | nn.Module) -> Iterator[AdapterModel]:
    """An AdapterModel around the base. A caller's model gets back what it had: the adapters,
    fusions and heads added here are removed on the way out."""
    if not isinstance(base, nn.Module):
        yield AdapterModel(_load_base(str(base)))
        return
    model = base if isinstance(base, AdapterModel) else AdapterModel(base)
    adapters, fusions = set(adapter_configs(model)), set(fusion_setups(model))
    heads, active_head = set(model.heads), model.active_head
    try:
        yield model
    finally:
        for fusion in set(fusion_setups(model)) - fusions:
            delete_fusion(model, fusion)
        for adapter in set(adapter_configs(model)) - adapters:
            delete_adapter(model, adapter)
        for head in set(model.heads) - heads:
            del model.heads[head]
        model.active_head = active_head
