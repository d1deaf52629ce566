"""`adapterfleet clean`: free what a pipeline's `storage` keeps that no later command reads.

A finished sweep (every one of its sweep runs FINISHED in MLflow: each task registered) leaves
Tune's experiment (`ray/<pipeline>/`, or `ray/previous/<sweep>/` once set aside) and its trials'
own folders (`sweeps/<sweep>/`): a later run finds its adapters in the registry and never
resumes it. A registered fusion leaves its work folder (`fusion/<target>/<key>/`), and a prune
the copies of the registered fusions it pulled (`prune/<target>/v<N>/v<M>/`; not its report).
Kept: a sweep interrupted or failed (the same command resumes it), a fusion not registered or
trained right now (its lock held), a prune's copies while it runs, a folder MLflow knows
nothing of (another pipeline's), and everything while a driver runs this pipeline's sweep.
`tokens=True` removes the token cache too (the next run tokenises again). Each folder is
renamed to `<storage>/.cleaning-*` and then deleted, Tune's state before its trials' folders: a
crash leaves a folder whole or a leftover the next clean removes, never a half sweep that
looks resumable.
"""

from __future__ import annotations

import os
import re
import shutil
import uuid
from collections.abc import Iterable
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

from adapterfleet._locks import lock_if_free
from adapterfleet.config import ConfigError, PipelineConfig
from adapterfleet.console import Say
from adapterfleet.orchestration.fusion_plan import FUSION_DIR, FUSION_LOCK, PRUNE_DIR, PRUNE_LOCK
from adapterfleet.registry import adapter_model_name, fusion_model_name
from adapterfleet.registry.errors import RegistryError
from adapterfleet.registry.heartbeat import sweep_driver_of
from adapterfleet.registry.models import search_versions
from adapterfleet.registry.status import experiment_runs_and_tags
from adapterfleet.registry.store import get_client, missing_store
from adapterfleet.registry.tags import TAG_CONFIG_HASH, TAG_LINEAGE_KEY, TAG_SWEEP, quote
from adapterfleet.tuning.plan import PREVIOUS_DIR, read_meta
from adapterfleet.tuning.spec import RAY_DIR, TOKENS_DIR, TRAIN_DIR, TRIALS_DIR, task_config_hashes

__all__ = ["CLEANING", "CleanPlan", "Scratch", "clean_storage", "plan_clean"]

CLEANING = ".cleaning-"  # <storage>/.cleaning-<id>: a folder on its way out


@dataclass(frozen=True)
class Scratch:
    """A folder nothing reads again: where, why, and its size in bytes."""

    path: Path
    why: str
    size: int


@dataclass(frozen=True)
class CleanPlan:
    """What `clean` removes, in that order, and a line for each thing it keeps."""

    storage: Path
    scratch: tuple[Scratch, ...]
    kept: tuple[str, ...]

    @property
    def size(self) -> int:
        return sum(item.size for item in self.scratch)


def plan_clean(config: PipelineConfig, *, tokens: bool = False) -> CleanPlan:
    """What `clean_storage` would remove now, read from `storage` and the tracking store."""
    storage = Path(config.storage).resolve()
    scratch = [
        Scratch(leftover, "left by an interrupted clean", folder_size(leftover))
        for leftover in sorted(storage.glob(CLEANING + "*"))
    ]
    kept: list[str] = []
    if missing_store(config.tracking_uri) is None:
        states = _sweep_states(config)
        scratch += _sweep_folders(storage, config.name, states, kept)
        scratch += _fusion_folders(storage, config)
    scratch += _prune_copies(storage, kept)
    if tokens and (storage / TOKENS_DIR).is_dir():
        cache = storage / TOKENS_DIR
        why = "the token cache (rebuilt by the next run)"
        scratch.append(Scratch(cache, why, folder_size(cache)))
    return CleanPlan(storage, tuple(scratch), tuple(kept))


def clean_storage(
    config: PipelineConfig, *, dry_run: bool = False, tokens: bool = False, say: Say = print
) -> CleanPlan:
    """Remove what `plan_clean` finds (`dry_run`: only say it), saying each folder, what is
    kept and the total. Refused while a driver runs the pipeline's sweep."""
    driver = sweep_driver_of(config.tracking_uri, config.name)
    if driver is not None:
        raise RegistryError(
            f"clean {config.name}: a driver runs this pipeline's sweep ({driver.name}, its last "
            f"heartbeat {driver.age_s:.0f} s ago) and uses its folders; run clean once it has "
            f"ended, or stop it ({driver.stop})"
        )
    storage = Path(config.storage).resolve()
    if not storage.is_dir():
        raise ConfigError(f"storage: {storage} is not a folder on this machine; nothing to clean")
    if not dry_run and not os.access(storage, os.W_OK | os.X_OK):
        raise ConfigError(f"storage: {storage} is read-only here; clean it where it is writable")
    plan = plan_clean(config, tokens=tokens)
    removed: list[Scratch] = []
    for item in plan.scratch:
        where = item.path.relative_to(plan.storage)
        if dry_run:
            say(f"would remove {where} ({size_text(item.size)}): {item.why}")
        elif _remove(item.path, plan.storage):
            say(f"removed {where} ({size_text(item.size)}): {item.why}")
            removed.append(item)
        else:
            say(f"kept {where}: a job trains it now")
    for line in plan.kept:
        say(f"kept {line}")
    total = size_text(plan.size if dry_run else sum(item.size for item in removed))
    if dry_run:
        say(f"clean {config.name}: would free {total} of {plan.storage}; run it without --dry-run")
    else:
        say(f"clean {config.name}: freed {total} of {plan.storage}")
    return plan


def _sweep_states(config: PipelineConfig) -> dict[str, set[str]]:
    """The statuses of each sweep's runs (one per task) in the pipeline's experiment; an
    unfinished sweep whose every task has since been registered for its settings (by another
    sweep) as FINISHED: resuming it trains nothing, so nothing resumes it, and it was kept for
    good as `the same command resumes it`."""
    found = experiment_runs_and_tags(config.tracking_uri, config.name)
    states: dict[str, set[str]] = {}
    settings: dict[str, set[tuple[str, str]]] = {}  # sweep -> its (task, config hash)
    for run in found[0] if found else ():
        name = run.tags.get(TAG_SWEEP, "")
        if run.kind == "sweep" and name:
            states.setdefault(name, set()).add(run.status)
            settings.setdefault(name, set()).add(
                (run.task or "", run.tags.get(TAG_CONFIG_HASH, ""))
            )
    unfinished = {name for name, seen in states.items() if seen != {"FINISHED"}}
    registered = _registered_settings(config, {t for n in unfinished for t, _ in settings[n]})
    alike = _same_settings(config)
    for name in unfinished:
        if {alike.get(key, key) for key in settings[name]} <= {alike.get(k, k) for k in registered}:
            states[name] = {"FINISHED"}
    return states


def _same_settings(config: PipelineConfig) -> dict[tuple[str, str], tuple[str, str]]:
    """(task, config hash) of the config's settings as an earlier version hashed them (the
    data files' paths in) -> as this one does: a sweep of either is of the same settings."""
    found = {}
    for task in config.adapter_tasks:
        current, *earlier = task_config_hashes(config, task)
        found.update({(task, digest): (task, current) for digest in earlier})
    return found


def _registered_settings(config: PipelineConfig, tasks: set[str]) -> set[tuple[str, str]]:
    """(task, config hash) of every adapter version registered for `tasks`."""
    client = get_client(config.tracking_uri) if tasks else None
    found = set()
    for task in sorted(tasks):
        name = adapter_model_name(config.registry_prefix, task)
        for version in search_versions(client, f"name = {quote(name)}"):
            found.add((task, (version.tags or {}).get(TAG_CONFIG_HASH, "")))
    return {(task, digest) for task, digest in found if digest}


def _sweep_folders(
    storage: Path, pipeline: str, states: dict[str, set[str]], kept: list[str]
) -> list[Scratch]:
    """Tune's experiments, then the trials' folders and Ray Train's runs of trials of several
    workers (their checkpoints: 8 MB for two one-epoch MiniLM trials), of the sweeps whose runs
    all finished."""
    own = re.compile(rf"{re.escape(pipeline)}-[0-9a-f]{{8}}-\d{{8}}T\d{{6}}")
    ray = storage / RAY_DIR
    tune = [ray / pipeline, *_children(ray / PREVIOUS_DIR)]
    named = [(folder, str((read_meta(folder) or {}).get("sweep_name", ""))) for folder in tune]
    named += [(folder, folder.name) for folder in _children(storage / TRIALS_DIR)]
    named += [(folder, folder.name) for folder in _children(ray / TRAIN_DIR)]
    found, unfinished = [], set()
    for folder, sweep in named:
        if not own.fullmatch(sweep) or sweep not in states:
            continue  # not this pipeline's, or MLflow does not know it: not ours to judge
        if states[sweep] != {"FINISHED"}:
            unfinished.add(sweep)
            continue
        what = "the trials' folders"
        if folder.is_relative_to(ray):
            train = folder.parent == ray / TRAIN_DIR
            what = "Ray Train's runs of the trials" if train else "Tune's experiment"
        why = f"{what} of sweep {sweep}, finished (its adapters are registered)"
        found.append(Scratch(folder, why, folder_size(folder)))
    for sweep in sorted(unfinished):
        state = ", ".join(sorted(states[sweep] - {"FINISHED"}))
        kept.append(f"sweep {sweep}: not finished ({state}); the same command resumes it")
    return found


def _fusion_folders(storage: Path, config: PipelineConfig) -> list[Scratch]:
    """The work folders of registered fusions (by the lineage key their name begins)."""
    found = []
    for target in _children(storage / FUSION_DIR):
        registered = _registered_keys(config, target.name)
        for work in _children(target):
            version = registered.get(work.name)
            if version is not None:
                why = f"the work folder of fusion {target.name} v{version}, registered"
                found.append(Scratch(work, why, folder_size(work)))
    return found


def _prune_copies(storage: Path, kept: list[str]) -> list[Scratch]:
    """The registered fusion versions a prune pulled (`prune/<target>/v<N>/v<M>/`, pulled again
    by the next prune), not while a prune of the target runs; its reports stay."""
    found = []
    for target in _children(storage / PRUNE_DIR):
        with lock_if_free(target / PRUNE_LOCK) as free:
            if (target / PRUNE_LOCK).is_file() and not free:
                kept.append(f"{PRUNE_DIR}/{target.name}: a prune of {target.name} runs now")
                continue
        for copy in (c for source in _children(target) for c in _children(source)):
            if re.fullmatch(r"v\d+", copy.name):
                why = f"the copy of fusion {target.name} {copy.name} a prune pulled (pulled again)"
                found.append(Scratch(copy, why, folder_size(copy)))
    return found


def _registered_keys(config: PipelineConfig, target: str) -> dict[str, str]:
    """Lineage key[:12] -> version, for every registered version of `target`'s fusion."""
    name = fusion_model_name(config.registry_prefix, target)
    client = get_client(config.tracking_uri)
    versions = search_versions(client, f"name = {quote(name)}")
    return {
        version.tags[TAG_LINEAGE_KEY][:12]: str(version.version)
        for version in versions
        if (version.tags or {}).get(TAG_LINEAGE_KEY)
    }


def _remove(folder: Path, storage: Path) -> bool:
    """Rename `folder` out of the way, then delete it; False where a job trains in it (a
    fusion's lock is held)."""
    lock = folder / FUSION_LOCK
    if lock.is_file():
        with lock_if_free(lock) as free:
            return free and _delete(folder, storage)
    return _delete(folder, storage)


def _delete(folder: Path, storage: Path) -> bool:
    if folder.name.startswith(CLEANING) and folder.parent == storage:
        shutil.rmtree(folder)  # a leftover: already out of the way
        return True
    away = storage / f"{CLEANING}{uuid.uuid4().hex[:12]}"
    os.replace(folder, away)
    shutil.rmtree(away)
    return True


def _children(folder: Path) -> Iterable[Path]:
    return sorted(child for child in folder.iterdir() if child.is_dir()) if folder.is_dir() else []


def folder_size(folder: Path) -> int:
    """Bytes of the files under `folder` (links not followed)."""
    total = 0
    for root, _, files in os.walk(folder):
        for name in files:
            with suppress(OSError):  # gone meanwhile
                total += os.lstat(os.path.join(root, name)).st_size
    return total


def size_text(size: int) -> str:
    """`size` bytes as MB (GB from 10 GB), one decimal."""
    return f"{size / 1e9:.1f} GB" if size >= 10e9 else f"{size / 1e6:.1f} MB"
