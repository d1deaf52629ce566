"""What `submit` uploads: the working dir holding the config, without the pipeline's storage.

The job runs in its copy of the working dir, which Ray unpacks in a temporary folder of its
session, a new one for each upload: a relative `storage` (or SQLite store) would put the runs,
checkpoints and registry there, out of sight of `status` here and of the next submission, so it
is refused (`check_job_storage`). A storage inside the working dir would ship every run,
checkpoint and MLflow store made so far with each job: it is left out of the upload.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from adapterfleet.config import (
    DEFAULT_STORAGE,
    ConfigError,
    apply_budget,
    apply_overrides,
    config_file,
    load_config,
    read_document,
)
from adapterfleet.errors import user_path
from adapterfleet.orchestration.job_errors import JobError

__all__ = ["check_job_storage", "config_document", "storage_excludes", "uploaded_config"]

# What a gitignore-style pattern (Ray's `excludes`) reads as a wildcard or an escape
_PATTERN_CHARS = re.compile(r"([\\*?\[\]!#])")


def uploaded_config(given: Path, folder: Path) -> tuple[Path, str]:
    """The config file and the path the job gives it: inside `folder`, or a packaged config's
    name (`demo`), which ships with adapterfleet on the cluster as here."""
    config = config_file(given).resolve()
    if config.is_relative_to(folder):
        return config, config.relative_to(folder).as_posix()
    if config != given.resolve():
        return config, str(given)
    raise JobError(
        f"config {config} is outside working_dir {folder}, the folder uploaded for the job; "
        "put the config inside it, or pass the folder that holds it as --working-dir"
    )


def config_document(config_path: Path, overrides: Sequence[str]) -> dict[str, Any]:
    """The YAML with the overrides and the budget they name applied, as `run` reads it, once
    `load_config` takes it: a bad key or value (a budget not declared, a reduction factor of 0)
    is refused here, not by a job that fails on the cluster after `submitted`. What needs the
    data, the base model or the cluster is checked there (its data need not be here)."""
    load_config(config_path, overrides)
    document = apply_budget(apply_overrides(read_document(config_path), overrides), overrides)
    document.setdefault("name", re.sub(r"[^A-Za-z0-9_-]", "-", config_path.stem))
    return document


def check_job_storage(document: Mapping[str, Any]) -> None:
    """Refuse a relative `storage` or SQLite `tracking_uri`: the job would write them inside
    its own copy of the working dir (see the module's note)."""
    where = (
        "the job would write it inside its copy of the working dir, a temporary folder of the "
        "Ray session that status here and the next submission do not see"
    )
    storage = str(document.get("storage") or DEFAULT_STORAGE)
    if not Path(storage).expanduser().is_absolute():
        raise ConfigError(
            f"storage: {storage!r} is relative: {where}; give a folder every node of the "
            "cluster shares, as an absolute path (--set storage=/mnt/adapterfleet)"
        )
    uri = document.get("tracking_uri")
    if isinstance(uri, str) and uri.startswith("sqlite:///") and not uri.startswith("sqlite:////"):
        raise ConfigError(
            f"tracking_uri: {uri!r} is a relative SQLite path: {where}; give an absolute one "
            "(sqlite:////mnt/adapterfleet/mlflow.db) or a tracking server (http://HEAD:5000)"
        )


def storage_excludes(storage: object, folder: Path) -> list[str]:
    """The runtime_env `excludes` that keep `storage` (the config's value) out of the upload
    of `folder` (absolute, resolved): a relative storage both as the job reads it, from the
    working dir, and as it reads here, from the current folder. None when it lies outside
    `folder`; the folder itself cannot be left out of its own upload."""
    value = Path(str(storage or DEFAULT_STORAGE)).expanduser()
    places = [value] if value.is_absolute() else [folder / value, Path.cwd() / value]
    excludes = []
    for place in places:
        resolved = user_path(place, "storage")  # `..` and links
        if resolved != folder and resolved.is_relative_to(folder):
            inside = _PATTERN_CHARS.sub(r"\\\1", resolved.relative_to(folder).as_posix())
            excludes.append(f"/{inside}/")
    return sorted(set(excludes))
