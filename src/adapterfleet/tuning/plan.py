"""Deciding what a sweep run has to do: which tasks are done, and whether to resume Tune.

A Tune experiment lives in `<storage>/ray/<pipeline name>`; next to Tune's files a small
`adapterfleet_sweep.json` records the sweep's name, the hash of the settings it was started with
and its tasks. It is resumed only when those still match; otherwise a new sweep starts and the old
experiment folder is moved to `<storage>/ray/previous/<its sweep name>`.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from adapterfleet.config import PipelineConfig
from adapterfleet.registry import ModelVersionInfo, adapter_model_name, get_version
from adapterfleet.registry.tags import BEST_ALIAS
from adapterfleet.tuning.spec import (
    RAY_DIR,
    TAG_CONFIG_HASH,
    SweepError,
    sweep_hash,
    task_config_hash,
)

META_FILE = "adapterfleet_sweep.json"
PREVIOUS_DIR = "previous"


@dataclass(frozen=True)
class SweepPlan:
    config: PipelineConfig
    tracking_uri: str
    experiment_id: str
    sweep_name: str
    sweep_hash: str
    config_hashes: dict[str, str]
    restore: bool  # resume the Tune experiment at `experiment_path`
    pending: tuple[str, ...]  # tasks without a registered adapter for their config hash
    registered: dict[str, ModelVersionInfo] = field(default_factory=dict)

    @property
    def experiment_path(self) -> Path:
        return experiment_path(self.config)

    def model_name(self, task: str) -> str:
        return adapter_model_name(self.config.registry_prefix, task)


def experiment_path(config: PipelineConfig) -> Path:
    return config.storage / RAY_DIR / config.name


def registered_adapter(
    uri: str, config: PipelineConfig, task: str, config_hash: str
) -> ModelVersionInfo | None:
    """The `@best` version of the task's adapter when it was registered for `config_hash`."""
    info = get_version(uri, adapter_model_name(config.registry_prefix, task), alias=BEST_ALIAS)
    return info if info is not None and info.tags.get(TAG_CONFIG_HASH) == config_hash else None


def read_meta(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads((path / META_FILE).read_text())
    except (OSError, ValueError):
        return None


def write_meta(plan: SweepPlan) -> None:
    meta = {"sweep_name": plan.sweep_name, "sweep_hash": plan.sweep_hash, "tasks": plan.pending}
    tmp = plan.experiment_path / (META_FILE + ".tmp")
    tmp.write_text(json.dumps(meta, indent=2))
    os.replace(tmp, plan.experiment_path / META_FILE)


def plan_sweep(
    config: PipelineConfig, tracking_uri: str, experiment_id: str, *, resume: bool | None = None
) -> SweepPlan:
    """What to run. `resume`: None resumes a matching interrupted sweep when there is one,
    True requires one (unless every task is already registered), False always starts anew.
    Tasks already registered for their config hash are never run again."""
    hashes = {t: task_config_hash(config, t) for t in config.adapter_tasks}
    digest = sweep_hash(hashes)
    registered = {}
    for task, config_hash in hashes.items():
        info = registered_adapter(tracking_uri, config, task, config_hash)
        if info is not None:
            registered[task] = info
    pending = tuple(t for t in config.adapter_tasks if t not in registered)
    path = experiment_path(config)
    meta = read_meta(path) if pending and _restorable(path) else None
    matches = (
        meta is not None
        and meta.get("sweep_hash") == digest
        and set(pending) <= set(meta.get("tasks", ()))
    )
    if resume and pending and not matches:
        why = "no sweep was started" if meta is None else "the adapter settings or tasks changed"
        raise SweepError(
            f"cannot resume the sweep in {path}: {why}; run the adapter stage without resume "
            "to start a new sweep"
        )
    restore = bool(pending) and matches and resume is not False
    if restore:
        name = str(meta["sweep_name"])  # type: ignore[index]
    else:
        name = f"{config.name}-{digest[:8]}-{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}"
    return SweepPlan(
        config, tracking_uri, experiment_id, name, digest, hashes, restore, pending, registered
    )


def _restorable(path: Path) -> bool:
    from ray.tune import Tuner

    return Tuner.can_restore(str(path))


def set_aside(plan: SweepPlan) -> Path | None:
    """Move an experiment folder that will not be resumed out of the way; its new path."""
    path = plan.experiment_path
    if plan.restore or not path.exists():
        return None
    old = read_meta(path) or {}
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    target = path.parent / PREVIOUS_DIR / str(old.get("sweep_name") or f"{path.name}-{stamp}")
    if target.exists():
        target = target.with_name(f"{target.name}-{stamp}")
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(str(path), str(target))
    return target
