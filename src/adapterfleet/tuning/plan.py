"""Deciding what a sweep run has to do: which tasks are done, and whether to resume Tune.

A Tune experiment lives in `<storage>/ray/<pipeline name>`; next to Tune's files a small
`adapterfleet_sweep.json` records the sweep's name, the hash of the settings it was started with
and its tasks. It is resumed only when those still match; otherwise a new sweep starts and the old
experiment folder is moved to `<storage>/ray/previous/<its sweep name>`. A sweep set aside there
unfinished (another config of the same pipeline name ran meanwhile) is brought back and resumed
when its settings are the config's again. A registered version whose run `mlflow gc` purged does
not count as registered: its task is trained again, in a new sweep.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from adapterfleet.config import PipelineConfig
from adapterfleet.registry import ModelVersionInfo, adapter_model_name, get_version
from adapterfleet.registry.purged import purged_runs, purged_versions
from adapterfleet.registry.store import missing_store
from adapterfleet.registry.tags import BEST_ALIAS, TAG_DATA_SHA256, TAG_SWEEP
from adapterfleet.tuning.interrupted_sweep import InterruptedSweep, other_interrupted
from adapterfleet.tuning.settings import TAG_SETTINGS, changed_settings, settings_tag
from adapterfleet.tuning.spec import (
    RAY_DIR,
    TAG_CONFIG_HASH,
    SweepError,
    data_sha256,
    sweep_hash,
    sweep_hashes,
    task_config_hash,
    task_config_hashes,
)
from adapterfleet.tuning.sweep_folders import META_FILE as META_FILE  # re-exported
from adapterfleet.tuning.sweep_folders import PREVIOUS_DIR as PREVIOUS_DIR
from adapterfleet.tuning.sweep_folders import modified, of_pipeline, read_meta, restorable
from adapterfleet.tuning.sweep_folders import place_experiment as place_experiment


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
    data_hashes: dict[str, str | None] = field(default_factory=dict)  # by task: data_sha256
    # registered for the same settings, but on data files whose content changed since
    changed: dict[str, ModelVersionInfo] = field(default_factory=dict)
    # `@best` registered for other settings: the version, and what changed (`key: old → new`)
    resettled: dict[str, tuple[ModelVersionInfo, list[str]]] = field(default_factory=dict)
    # where the sweep to resume was set aside (under previous/), to bring back first
    set_aside_at: Path | None = None
    # registered for the current settings and data, but its run purged by mlflow gc
    purged: dict[str, ModelVersionInfo] = field(default_factory=dict)
    # (name, folder) of an interrupted sweep of these settings whose saved state is gone: a
    # plain run starts anew, and its finished trials are trained again
    lost: tuple[str, Path] | None = None
    # the sweep an interruption left, of other settings: not resumed, and its mark stays on
    interrupted: InterruptedSweep | None = None

    @property
    def experiment_path(self) -> Path:
        return experiment_path(self.config)

    def model_name(self, task: str) -> str:
        return adapter_model_name(self.config.registry_prefix, task)


def experiment_path(config: PipelineConfig) -> Path:
    return config.storage / RAY_DIR / config.name


def earlier_adapter(
    uri: str, config: PipelineConfig, task: str, keys: Keys
) -> ModelVersionInfo | None:
    """The newest version of the task's adapter registered for `keys` (`current_keys`), when
    `@best` has moved on to another: a config changed and then changed back, a data file
    edited and restored. Its weights are what a sweep would train again."""
    from adapterfleet.registry.models import get_client, search_versions
    from adapterfleet.registry.tags import quote

    name, client = adapter_model_name(config.registry_prefix, task), get_client(uri)
    found = [
        version
        for config_hash in keys[0]
        for version in search_versions(
            client, f"name = {quote(name)} AND tags.`{TAG_CONFIG_HASH}` = {quote(config_hash)}"
        )
    ]
    gone = purged_runs(uri, (version.run_id for version in found))  # not there to reuse
    for version in sorted(found, key=lambda mv: -int(mv.version)):
        if version.run_id in gone:
            continue
        info = get_version(uri, name, version=version.version)
        if info is not None and is_current(info, keys):
            return info
    return None


Keys = tuple[tuple[str, ...], str | None]  # the config hashes taken, the data files' sha256


def current_keys(config: PipelineConfig, task: str) -> Keys:
    """What a version of the task's adapter must have been registered for now: one of its
    settings' config hashes (`task_config_hashes`) and its data files' sha256 (None for hub
    data)."""
    return task_config_hashes(config, task), data_sha256(config, task)


def is_current(info: ModelVersionInfo, keys: Keys) -> bool:
    """`info` was registered for `keys` (`current_keys`); a version from before the data tag
    is taken on its settings alone."""
    config_hashes, data = keys
    trained_on = info.tags.get(TAG_DATA_SHA256)
    if info.tags.get(TAG_CONFIG_HASH) not in config_hashes:
        return False
    return None in (trained_on, data) or trained_on == data


def write_meta(plan: SweepPlan) -> None:
    meta = {"sweep_name": plan.sweep_name, "sweep_hash": plan.sweep_hash, "tasks": plan.pending}
    meta["pipeline"] = plan.config.name
    meta["data_sha256"] = {task: plan.data_hashes.get(task) for task in plan.pending}
    meta["settings"] = {task: settings_tag(plan.config, task) for task in plan.pending}
    tmp = plan.experiment_path / (META_FILE + ".tmp")
    tmp.write_text(json.dumps(meta, indent=2))
    os.replace(tmp, plan.experiment_path / META_FILE)


def plan_sweep(
    config: PipelineConfig, tracking_uri: str, experiment_id: str, *, resume: bool | None = None
) -> SweepPlan:
    """What to run. `resume`: None resumes a matching interrupted sweep when there is one,
    True requires one (unless every task is already registered), False always starts anew.
    Tasks already registered for their config hash are never run again; a version whose run
    `mlflow gc` purged is not registered (nothing of it can be pulled), and a task of one is
    trained in a new sweep: a finished sweep restored would register the same purged trial."""
    survey = _Survey.of(config, tracking_uri)
    if resume:
        survey.check_resumable(config)
    meta = survey.meta
    restore = bool(survey.pending) and survey.matches and resume is not False
    restore = restore and not set(survey.purged) & set(survey.pending)
    if restore:
        name = str(meta["sweep_name"])  # type: ignore[index]
    else:
        began = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
        name = sweep_prefix(config.name, survey.digest) + began
    return SweepPlan(
        config,
        tracking_uri,
        experiment_id,
        name,
        survey.digest,
        survey.hashes,
        restore,
        survey.pending,
        survey.registered,
        survey.data_hashes,
        survey.changed,
        survey.resettled,
        survey.source if restore and survey.source != survey.path else None,
        survey.purged,
        _lost_sweep(survey) if survey.pending and not restore and resume is None else None,
        None
        if restore
        else other_interrupted(config, tracking_uri, survey.digests, survey.note_of),
    )


def check_resumable(config: PipelineConfig, tracking_uri: str) -> None:
    """What `resume=True` requires, checked before a command writes anything: an interrupted
    sweep of the same settings, or every task registered already. Raises `SweepError`; a
    SQLite or file store that does not exist yet is read as empty, not created."""
    _Survey.of(config, tracking_uri).check_resumable(config)


@dataclass(frozen=True)
class _Survey:
    """The registry and the sweep folder as `plan_sweep` finds them."""

    path: Path
    digest: str
    hashes: dict[str, str]
    registered: dict[str, ModelVersionInfo]
    pending: tuple[str, ...]
    meta: dict[str, Any] | None
    data_hashes: dict[str, str | None]
    changed: dict[str, ModelVersionInfo]
    resettled: dict[str, tuple[ModelVersionInfo, list[str]]]
    source: Path  # where `meta` was read: `path`, or a sweep set aside under previous/
    purged: dict[str, ModelVersionInfo] = field(default_factory=dict)
    uri: str = ""  # the tracking store's
    digests: tuple[str, ...] = ()  # `digest`, then an earlier version's for the same settings

    @classmethod
    def of(cls, config: PipelineConfig, tracking_uri: str) -> _Survey:
        hashes = {t: task_config_hash(config, t) for t in config.adapter_tasks}
        data = {t: data_sha256(config, t) for t in config.adapter_tasks}
        missing = missing_store(tracking_uri) is not None  # read as empty, not created
        found = _Registered() if missing else _Registered.of(config, tracking_uri)
        pending = tuple(t for t in config.adapter_tasks if t not in found.registered)
        path = experiment_path(config)
        meta = read_meta(path) if pending and restorable(path) else None
        digest = sweep_hash(hashes)
        kept = (found.registered, pending, meta, data, found.changed, found.resettled)
        digests = sweep_hashes(config)
        survey = cls(path, digest, hashes, *kept, path, found.purged, tracking_uri, digests)
        return survey if survey.matches or not pending else survey._set_aside_match()

    def _set_aside_match(self) -> _Survey:
        """This survey reading, instead of the folder in place, the newest sweep under
        previous/ that matches; unchanged when none does."""
        folder = self.path.parent / PREVIOUS_DIR
        places = sorted(folder.iterdir(), key=modified, reverse=True) if folder.is_dir() else []
        for place in places:
            found = replace(self, meta=read_meta(place), source=place)
            theirs = found.meta is not None and of_pipeline(found.meta, self.path.name)
            if theirs and found.matches and restorable(place):
                return found
        return self

    @property
    def matches(self) -> bool:
        """An interrupted sweep of the same settings holds every pending task."""
        meta = self.meta
        return (
            meta is not None
            and meta.get("sweep_hash") in self.digests
            and set(self.pending) <= set(meta.get("tasks", ()))
            and not self.data_changed
        )

    @property
    def data_changed(self) -> list[str]:
        """Tasks whose files' content differs from what their registered adapter or the
        interrupted sweep recorded (a hash either side does not have is not compared)."""
        started = (self.meta or {}).get("data_sha256") or {}
        started = started if isinstance(started, dict) else {}
        return sorted(
            task
            for task in self.pending
            if task in self.changed
            or None not in (started.get(task), self.data_hashes.get(task))
            and started.get(task) != self.data_hashes.get(task)
        )

    def note_of(self, name: str) -> dict[str, Any] | None:
        """The note of sweep `name`'s folder: in place, or set aside under previous/."""
        here = read_meta(self.path) or {}
        aside = self.path.parent / PREVIOUS_DIR / name
        return here if here.get("sweep_name") == name else read_meta(aside)

    def check_resumable(self, config: PipelineConfig) -> None:
        if self.pending and self.matches:
            return
        lost = _lost_sweep(self) if self.pending else None
        other = None if lost else other_interrupted(config, self.uri, self.digests, self.note_of)
        if other is not None:  # its -o left out: this command would do another job
            raise SweepError(f"nothing to resume for these settings: {other.line()}")
        if not self.pending:
            return
        if lost is not None:
            name, where = lost
            state = "is incomplete" if where.exists() else "is gone"
            raise SweepError(
                f"cannot resume the sweep {name}: its saved state ({where}) {state}, so its "
                "trials cannot be restored; run the pipeline without --resume (`adapterfleet "
                "run CONFIG`) to start afresh (adapters already registered are kept)"
            )
        if self.meta is None:
            why = "no sweep was started there"
        elif self.data_changed:
            why = f"the data files of {', '.join(self.data_changed)} changed since it started"
        else:
            why = "the adapter settings or tasks changed since it started"
        raise SweepError(
            f"cannot resume the sweep in {self.path}: {why}; run the pipeline without --resume "
            "(`adapterfleet run CONFIG`) to start a new sweep; adapters already registered for "
            "the same settings are not trained again"
        )


@dataclass
class _Registered:
    """What the registry holds for each task, as `SweepPlan` names it."""

    registered: dict[str, ModelVersionInfo] = field(default_factory=dict)
    changed: dict[str, ModelVersionInfo] = field(default_factory=dict)
    resettled: dict[str, tuple[ModelVersionInfo, list[str]]] = field(default_factory=dict)
    purged: dict[str, ModelVersionInfo] = field(default_factory=dict)

    @classmethod
    def of(cls, config: PipelineConfig, uri: str) -> _Registered:
        """Each task's `@best` version, and an earlier one of the current settings and data
        where `@best` is not (`earlier_adapter`); whether their runs are still there is asked
        once for every task."""
        found = cls()
        bests = {
            task: get_version(uri, adapter_model_name(config.registry_prefix, task), BEST_ALIAS)
            for task in config.adapter_tasks
        }
        gone = purged_versions(uri, (best for best in bests.values() if best is not None))
        for task, best in bests.items():
            keys = current_keys(config, task)
            info = best if best and best.tags.get(TAG_CONFIG_HASH) in keys[0] else None
            current = info is not None and is_current(info, keys)
            if info is not None and current and (info.name, info.version) in gone:
                found.purged[task] = info  # trained again, unless an earlier one is there
            if info is not None and current and task not in found.purged:
                found.registered[task] = info
            elif earlier := earlier_adapter(uri, config, task, keys):
                found.registered[task] = earlier  # not under @best: the sweep moves it back
            elif info is not None and not current:  # its settings match: only the data differs
                found.changed[task] = info
            elif best is not None and info is None:  # trained for other settings: say which
                why = changed_settings(config, task, best.tags.get(TAG_SETTINGS))
                found.resettled[task] = (best, why)
        return found


def _lost_sweep(survey: _Survey) -> tuple[str, Path] | None:
    """(name, folder) of the newest sweep of these settings that MLflow holds unfinished for a
    pending task (its runs KILLED, FAILED or still RUNNING) whose Tune state is not where a
    resume looks for it: its folder deleted, in place or set aside under previous/."""
    from adapterfleet.registry.status import experiment_runs_and_tags

    found = experiment_runs_and_tags(survey.uri, survey.path.name) if survey.uri else None
    heads = tuple(sweep_prefix(survey.path.name, digest) for digest in survey.digests)
    sweeps = [
        run
        for run in (found[0] if found else [])
        if run.kind == "sweep" and run.task in survey.pending and run.status != "FINISHED"
        and run.tags.get(TAG_SWEEP, "").startswith(heads)
    ]  # fmt: skip
    newest = max(sweeps, key=lambda run: run.start_time, default=None)
    if newest is None or newest.tags[TAG_SWEEP] == (survey.meta or {}).get("sweep_name"):
        return None  # none, or found: refused for what changed since it started
    name = newest.tags[TAG_SWEEP]
    in_place = (read_meta(survey.path) or {}).get("sweep_name")
    set_aside = in_place not in (None, name)  # another sweep there: this one was moved aside
    return name, survey.path.parent / PREVIOUS_DIR / name if set_aside else survey.path


def sweep_prefix(pipeline: str, digest: str) -> str:
    """How a sweep's name begins, `<pipeline>-<settings hash>-`; the time it began follows."""
    return f"{pipeline}-{digest[:8]}-"
