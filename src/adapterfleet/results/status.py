"""`adapterfleet status`: where a pipeline stands, from MLflow runs and the model registry.

Five queries whatever the number of trials: the experiment with its tags, its runs (paged), and
two paged searches per model kind, straight on a SQLite store or as REST requests to a tracking
server, without importing MLflow (`registry.status`); then the dev metric history of the trials
still running (one query on SQLite, one request per such trial to a server), and whether the
runs of registered versions that are not among the experiment's are still there (one query, or
two requests: after `mlflow gc` they are not, and the version counts as not registered). Per
task: trials done / running / failed / pending (children of the task's newest sweep run, one
per trial id), the best dev metric so far and the registered adapter; per fusion target: the
registered fusion or what it waits for."""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from adapterfleet.config import PipelineConfig
from adapterfleet.config.task_metrics import higher_is_better
from adapterfleet.registry import (
    ModelVersionInfo,
    RegistryError,
    RunRecord,
    list_models,
    safe_uri,
)
from adapterfleet.registry.heartbeat import silent_since
from adapterfleet.registry.info import made_by
from adapterfleet.registry.interrupted import interrupted_at
from adapterfleet.registry.status import FAILED, RUNNING, experiment_runs_and_tags
from adapterfleet.registry.status import experiment_names as experiments_in
from adapterfleet.registry.store import missing_store
from adapterfleet.results import status_trials as trials_of
from adapterfleet.results.formats import metric_label, number_from_tag, table, version_label
from adapterfleet.results.status_notes import (
    INTERRUPTED,
    adapters_moved_on,
    fused_adapters,
    interruption,
    no_store,
    other_adapters,
    other_settings,
    purged_models,
    purged_note,
    silence,
)
from adapterfleet.results.status_plan import StatusPlan
from adapterfleet.results.status_trials import status_tasks, task_trials, with_best_so_far

BEST_ALIAS = "best"
# How a task's registered adapter was trained otherwise than the config says (`" (key: old →
# new)"`, "" when its tags do not say which settings), None when it was trained for them
SettingsCheck = Callable[[str, ModelVersionInfo], str | None]


@dataclass(frozen=True)
class TaskStatus:
    task: str
    metric: str  # e.g. "accuracy" (higher is better) or "mse" (lower is better)
    total: int  # trials in the grid
    done: int
    running: int
    failed: int
    best: float | None  # best dev metric so far over the trials that neither failed nor stopped
    best_trial: str | None
    adapter_version: int | None
    adapter_aliases: tuple[str, ...] = ()
    stopped: int = 0  # stopped early by the scheduler (ASHA): ended, no adapter
    note: str = ""  # a registered adapter trained with other settings than the config's

    @property
    def pending(self) -> int:
        return max(0, self.total - self.done - self.stopped - self.running - self.failed)

    @property
    def registered(self) -> bool:
        return BEST_ALIAS in self.adapter_aliases


@dataclass(frozen=True)
class FusionStatus:
    target: str
    adapters: tuple[str, ...]
    state: str  # "v2 @best", "waiting for a, b", "blocked: a failed", "training", "failed", ...
    version: int | None = None
    missing: tuple[str, ...] = ()
    best: float | None = None  # the registered fusion's dev metric
    metric: str = ""  # the metric `best` is in (the registered fusion's `metric` tag)
    fused: tuple[tuple[str, int], ...] = ()  # (task, version) the registered fusion fuses
    note: str = ""  # a registered fusion of other adapters than `adapters`

    @property
    def adapters_label(self) -> str:
        """`a:v4,b:v3`: what the registered version fuses, else the adapters planned."""
        return ",".join(f"{t}:v{n}" for t, n in self.fused) or ",".join(self.adapters)


@dataclass(frozen=True)
class BaselineStatus:
    system: str
    task: str
    total: int  # seeds
    done: int
    running: int
    failed: int
    mean: float | None  # mean dev metric over the finished seeds
    metric: str = ""  # the metric `mean` is in

    @property
    def pending(self) -> int:
        return max(0, self.total - self.done - self.running - self.failed)


@dataclass(frozen=True)
class PipelineStatus:
    name: str
    tracking_uri: str  # credentials masked
    experiment_found: bool
    tasks: tuple[TaskStatus, ...]
    fusions: tuple[FusionStatus, ...]
    elapsed_s: float = 0.0
    baselines: tuple[BaselineStatus, ...] = ()
    metric: str = "accuracy"
    interrupted: str = ""  # what Ctrl-C, SIGTERM or a driver gone silent stopped, if so
    missing_store: str = ""  # the SQLite or file store that is not there, if so
    others: tuple[str, ...] = ()  # the store's pipelines, where this one is not among them

    def render(self) -> str:
        """A compact plain-text table."""
        lines = [f"pipeline {self.name}  (tracking {safe_uri(self.tracking_uri)})"]
        if self.missing_store:
            lines.append(no_store(self.missing_store))
        elif not self.experiment_found and self.others:  # a wrong -o name or tracking_uri?
            there = ", ".join(self.others)
            lines.append(f"no runs yet (no experiment {self.name!r} here; pipelines here: {there})")
        elif not self.experiment_found:
            lines.append("no runs yet (experiment not found)")
        if self.interrupted:
            lines.append(self.interrupted)
        task_rows = [("TASK", "DONE", "STOP", "RUN", "FAIL", "PEND", "BEST", "ADAPTER")]
        for t in self.tasks:
            best = metric_label(t.best, t.metric)
            counts = (t.done, t.stopped, t.running, t.failed, t.pending)
            version = version_label(t.adapter_version, t.adapter_aliases)
            task_rows.append((t.task, *map(str, counts), best, version))
        lines += [*table(task_rows), *(t.note for t in self.tasks if t.note)]
        if self.fusions:
            rows = [("FUSION", "ADAPTERS", "STATE", "BEST")]
            rows += [
                (
                    f.target,
                    f.adapters_label,
                    f.state,
                    metric_label(f.best, f.metric or self.metric),
                )
                for f in self.fusions
            ]
            lines += ["", *table(rows), *(f.note for f in self.fusions if f.note)]
        if self.baselines:
            rows = [("BASELINE", "TASK", "DONE", "RUN", "FAIL", "PEND", "MEAN")]
            for b in self.baselines:
                mean = metric_label(b.mean, b.metric or self.metric)
                counts = (b.done, b.running, b.failed, b.pending)
                rows.append((b.system, b.task, *map(str, counts), mean))
            lines += ["", *table(rows)]
        return "\n".join(lines)


def pipeline_status(
    config: PipelineConfig,
    tracking_uri: str,
    settings: SettingsCheck | None = None,
    config_hashes: Mapping[str, tuple[str, ...]] | None = None,
) -> PipelineStatus:
    """The status of `config`'s pipeline in the tracking store at `tracking_uri`; `settings`
    notes registered adapters trained otherwise than `config` says; `config_hashes` (task ->
    its settings' hashes) counts the trials of the sweeps of `config`'s settings."""
    plan = replace(StatusPlan.from_config(config), config_hashes=dict(config_hashes or {}))
    return plan_status(plan, tracking_uri, settings=settings)


def status_by_name(name: str, tracking_uri: str) -> PipelineStatus:
    """The status of the pipeline whose experiment is `name`, without its config file."""
    started = time.perf_counter()
    found = experiment_runs_and_tags(tracking_uri, name)  # None, creating no store, if absent
    if found is None:
        there = ", ".join(experiments_in(tracking_uri)) or "none"
        raise RegistryError(
            f"no pipeline {name!r} in {safe_uri(tracking_uri)} (pipelines there: {there}); "
            "check the name, or point at its store (-o storage=..., --tracking-uri)"
        )
    records, tags = found
    plan = StatusPlan.from_tags(name, tags, records)
    return plan_status(plan, tracking_uri, (records, tags), started)


def plan_status(
    plan: StatusPlan,
    uri: str,
    found: tuple[Sequence[RunRecord], Mapping[str, str]] | None = None,
    started: float | None = None,
    settings: SettingsCheck | None = None,
) -> PipelineStatus:
    """`found`: the experiment's runs and tags, read here when not given."""
    started = time.perf_counter() if started is None else started
    found = experiment_runs_and_tags(uri, plan.name) if found is None else found
    runs, tags = (None, {}) if found is None else (list(found[0]), found[1])
    adapters = _by_task(list_models(uri, plan.prefix, "adapter")) if runs is not None else {}
    fusions = _by_task(list_models(uri, plan.prefix, "fusion")) if runs is not None else {}
    purged = purged_models(uri, [*adapters.values(), *fusions.values()], runs or [])
    stopped_at = interrupted_at(tags)
    silent_at = None if stopped_at is not None else silent_since(tags)
    # Ctrl-C ended them KILLED (or left them RUNNING); a driver killed at once left them RUNNING
    stopped = (*RUNNING, "KILLED") if stopped_at is not None else RUNNING
    gone = stopped_at is not None or silent_at is not None
    # a run begun after the mark (a sweep of other settings, which leaves it on) was not stopped
    after = stopped_at * 1000 if stopped_at is not None else float("inf")
    records = [_stopped(r, stopped) if gone and r.start_time <= after else r for r in runs or []]
    records = with_best_so_far(plan, uri, records)
    tasks = tuple(
        _task_status(plan, t, records, adapters.get(t), settings, purged)
        for t in status_tasks(plan)
    )
    ended = {t.task for t in tasks if t.failed and not (t.running or t.pending)}  # no more
    ended = {t for t in ended if trials_of.swept_with(records, t, plan.config_hashes.get(t, ()))}
    fusion_rows = tuple(
        _fusion_status(plan, target, adapters, fusions.get(target), records, purged, ended)
        for target in plan.targets
    )
    said = _shown_trials(plan, records)  # the line counts what the table counts
    baselines = tuple(
        _baseline_status(plan, system, task, records)
        for system, names in plan.baselines.items()
        for task in names
    )
    return PipelineStatus(
        name=plan.name,
        tracking_uri=safe_uri(uri),
        experiment_found=runs is not None,
        tasks=tasks,
        fusions=fusion_rows,
        elapsed_s=time.perf_counter() - started,
        baselines=baselines,
        metric=plan.metric,
        interrupted=interruption(stopped_at, said, plan.config_hashes) or silence(silent_at, said),
        missing_store=(gone := str(missing_store(uri) or "")),
        others=tuple(experiments_in(uri)) if runs is None and not gone else (),
    )


def _shown_trials(plan: StatusPlan, records: Sequence[RunRecord]) -> list[RunRecord]:
    """`records` less the trials the tasks' rows leave out (another sweep's, of other
    settings): a trial an earlier sweep left KILLED was counted in the interrupted line as
    stopped, one more than the table's pending."""
    shown = {
        r.run_id
        for task in status_tasks(plan)
        for r in task_trials(records, task, plan.config_hashes.get(task, ()))
    }
    return [r for r in records if r.kind != "trial" or r.run_id in shown]


def _stopped(run: RunRecord, statuses: tuple[str, ...]) -> RunRecord:
    """A run of a pipeline that Ctrl-C stopped, or whose driver is gone, in one of `statuses`:
    interrupted, counted neither running nor failed (pending), and in the line that says so."""
    return replace(run, status=INTERRUPTED) if run.status in statuses else run


def _by_task(infos: Iterable[ModelVersionInfo]) -> dict[str, ModelVersionInfo]:
    return {info.task: info for info in infos if info.task}


def _task_status(
    plan: StatusPlan,
    task: str,
    records: Sequence[RunRecord],
    model: ModelVersionInfo | None,
    settings: SettingsCheck | None = None,
    purged: Collection[str] = (),  # the runs of registered versions that mlflow gc purged
) -> TaskStatus:
    metric = plan.metric_for(task)
    trials = task_trials(records, task, plan.config_hashes.get(task, ()))
    stopped = [r for r in trials if r.stopped_early]
    trials = [r for r in trials if not r.stopped_early]
    scored = [(_score(r, metric), r) for r in trials if r.status not in FAILED]
    scored = [(s, r) for s, r in scored if s is not None]
    sign = 1.0 if higher_is_better(metric) else -1.0
    best = max(scored, key=lambda sr: sign * sr[0], default=None)
    status = TaskStatus(
        task=task,
        metric=metric,
        total=plan.task_trials.get(task, plan.trials_per_task) if task in plan.tasks else 0,
        done=sum(r.status == "FINISHED" for r in trials),
        running=sum(r.status in RUNNING for r in trials),
        failed=sum(r.status in FAILED for r in trials),
        stopped=len(stopped),
        best=best[0] if best else None,
        best_trial=(best[1].trial_id or best[1].run_id) if best else None,
        adapter_version=model.version if model else None,
        adapter_aliases=model.aliases if model else (),
    )
    status = _registered_best(status, model)
    differs = settings(task, model) if settings is not None and model is not None else None
    what = f"adapter {task} {version_label(model.version, model.aliases)}" if model else ""
    if model is not None and model.run_id in purged:
        return replace(status, note=purged_note(what, model))
    if differs is None:
        return status
    return replace(status, note=other_settings(what, differs, made_by(model.tags, plan.name)))


def _registered_best(status: TaskStatus, model: ModelVersionInfo | None) -> TaskStatus:
    """Once the newest sweep is over, BEST is the `best` version's own score: a sweep on other
    data (files edited, then put back: `best` moved back to the version of the sweep before)
    is not the one `best` came from, and its figure beside `v1 @best` was another model's."""
    if model is None or not status.registered or status.running or status.pending:
        return status
    value = number_from_tag(model.tags.get("metric_value"))
    if value is None or model.tags.get("metric") != status.metric:
        return status
    return replace(status, best=value, best_trial=model.tags.get("adapterfleet.trial_id"))


def _score(run: RunRecord, metric: str) -> float | None:
    """The trial's best dev metric (so far, while it runs: `with_best_so_far`), else its
    latest dev metric."""
    value = run.metrics.get(f"best_dev_{metric}", run.metrics.get(f"dev_{metric}"))
    return None if value is None or value != value else value


def _usable(model: ModelVersionInfo | None, purged: Collection[str]) -> bool:
    """An adapter a fusion takes: under `best`, its run not purged (trained again)."""
    return model is not None and BEST_ALIAS in model.aliases and model.run_id not in purged


def _baseline_status(
    plan: StatusPlan, system: str, task: str, records: Sequence[RunRecord]
) -> BaselineStatus:
    """Seeds of `system` on `task` done / running / failed (the newest run per seed counts);
    MT-A's per-task runs appear when its joint run ends, which counts as running before."""
    newest: dict[str, RunRecord] = {}
    for run in records:
        if run.kind == "baseline" and run.system == system and run.task == task:
            key = run.seed or run.run_id
            if key not in newest or run.start_time >= newest[key].start_time:
                newest[key] = run
    runs = list(newest.values())
    done = [r for r in runs if r.status == "FINISHED"]
    running = sum(r.status in RUNNING for r in runs)
    if system == "mt-a":
        joint = [r for r in records if r.kind == "mt-a" and r.status in RUNNING]
        running += len({r.seed for r in joint} - {r.seed for r in done})
    metric = plan.metric_for(task)
    scores = [v for r in done if (v := _score(r, metric)) is not None]
    mean = sum(scores) / len(scores) if scores else None
    failed = sum(r.status in FAILED for r in runs)
    seeds = plan.baseline_seeds
    return BaselineStatus(system, task, seeds, len(done), running, failed, mean, metric)


def _fusion_status(
    plan: StatusPlan,
    target: str,
    adapters: dict[str, ModelVersionInfo],
    model: ModelVersionInfo | None,
    records: Sequence[RunRecord],
    purged: Collection[str] = (),  # as `_task_status`'s
    failed: Collection[str] = (),  # tasks whose sweep ended with trials failed, none registered
) -> FusionStatus:
    sources = plan.targets[target]
    if model is not None:
        text = version_label(model.version, model.aliases)
        metric = model.tags.get("metric") or ""
        best = number_from_tag(model.tags.get(f"dev_{metric}"))
        fused = fused_adapters(model)
        what = f"fusion {target} {text}"
        note = other_adapters(what, fused, sources, plan.source, model)
        note = note or adapters_moved_on(what, fused, adapters)
        if model.run_id in purged:
            note = purged_note(what, model)
        return FusionStatus(
            target, sources, text, model.version, best=best, metric=metric, fused=fused, note=note
        )
    missing = tuple(s for s in sources if not _usable(adapters.get(s), purged))
    if missing:  # a source whose trials failed is not coming: the sweep ended
        ended = [s for s in missing if s in failed]
        state = (
            f"blocked: {', '.join(ended)} failed" if ended else f"waiting for {', '.join(missing)}"
        )
        return FusionStatus(target, sources, state, missing=missing)
    runs = [r for r in records if r.kind == "fusion" and r.task == target]
    latest = max(runs, key=lambda r: r.start_time, default=None)
    if latest is not None and latest.status in RUNNING:
        return FusionStatus(target, sources, "training")
    if latest is not None and latest.status in (INTERRUPTED, "KILLED"):  # KILLED: stopped
        return FusionStatus(target, sources, "interrupted")
    if latest is not None and latest.status in FAILED:
        return FusionStatus(target, sources, f"failed (run {latest.run_id})")
    return FusionStatus(target, sources, "not started")
