"""`adapterfleet status`: where a pipeline stands, from MLflow runs and the model registry.

Five queries whatever the number of trials: the experiment with its tags, its runs (paged), and
two paged searches per model kind, straight on a SQLite store or as REST requests to a tracking
server, without importing MLflow (`registry.status`). Per task: trials done / running / failed /
pending (children of the task's newest sweep run, one per trial id), the best dev metric so far
and the registered adapter; per fusion target: the registered fusion or what it waits for."""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from adapterfleet.config import PipelineConfig
from adapterfleet.config.task_metrics import higher_is_better
from adapterfleet.registry import (
    ModelVersionInfo,
    RegistryError,
    RunRecord,
    experiment_runs,
    list_models,
    safe_uri,
)
from adapterfleet.registry.status import FAILED, RUNNING, experiment_runs_and_tags
from adapterfleet.registry.status import experiment_names as experiments_in
from adapterfleet.results.formats import metric_label, number_from_tag, version_label

BEST_ALIAS = "best"
TAG_PLAN = "adapterfleet.pipeline"  # experiment tag: the StatusPlan as JSON
_MAX_TAG_CHARS = 5000  # MLflow's limit for an experiment tag value


@dataclass(frozen=True)
class StatusPlan:
    """What `status` needs to know of a pipeline: from its config, or (for `status NAME`) from
    the tag `adapterfleet run` sets on the pipeline's experiment."""

    name: str
    prefix: str
    metric: str
    trials_per_task: int
    tasks: tuple[str, ...]  # swept tasks, in config order
    targets: dict[str, tuple[str, ...]] = field(default_factory=dict)
    baselines: dict[str, tuple[str, ...]] = field(default_factory=dict)  # system -> its tasks
    baseline_seeds: int = 0
    task_trials: dict[str, int] = field(default_factory=dict)  # tasks with a grid of their own
    task_metrics: dict[str, str] = field(default_factory=dict)  # tasks selected on another metric

    def metric_for(self, task: str) -> str:
        """The metric `task` is selected on: its own (a regression task's pearson), else
        `metric`."""
        return self.task_metrics.get(task, self.metric)

    @classmethod
    def from_config(cls, config: PipelineConfig) -> StatusPlan:
        stage = config.baselines
        metric = config.adapters.training.metric
        metrics = {t: config.adapters.training_for(t).metric for t in config.tasks}
        return cls(
            name=config.name,
            prefix=config.registry_prefix or config.name,
            metric=metric,
            task_metrics={t: m for t, m in metrics.items() if m != metric},
            trials_per_task=_grid_size(config),
            tasks=tuple(config.adapter_tasks),
            task_trials={
                task: _grid_size(config, task)
                for task in config.adapters.task_grid
                if task in config.adapter_tasks
            },
            targets={t: tuple(s) for t, s in config.fusion.targets.items()},
            baselines={
                system: tuple(config.adapter_tasks if system == "mt-a" else stage.tasks)
                for system in stage.systems
            },
            baseline_seeds=len(stage.seeds) if stage.systems else 0,
        )

    def to_tags(self) -> dict[str, str]:
        """The experiment tag; empty when the plan is too large for one (fleets of hundreds of
        tasks): `status NAME` then lists the tasks it finds in the runs."""
        plan = {
            "prefix": self.prefix,
            "metric": self.metric,
            "trials_per_task": self.trials_per_task,
            "tasks": list(self.tasks),
            "targets": {t: list(s) for t, s in self.targets.items()},
        }
        if self.task_trials:
            plan["task_trials"] = self.task_trials
        if self.task_metrics:
            plan["task_metrics"] = self.task_metrics
        if self.baselines:
            plan["baselines"] = {s: list(t) for s, t in self.baselines.items()}
            plan["baseline_seeds"] = self.baseline_seeds
        text = json.dumps(plan, separators=(",", ":"))
        return {TAG_PLAN: text} if len(text) <= _MAX_TAG_CHARS else {}

    @classmethod
    def from_tags(
        cls, name: str, tags: Mapping[str, str], records: Sequence[RunRecord]
    ) -> StatusPlan:
        found = tuple(dict.fromkeys(r.task for r in records if r.kind == "sweep" and r.task))
        try:
            plan = json.loads(tags.get(TAG_PLAN, "{}"))
        except json.JSONDecodeError:
            plan = {}
        return cls(
            name=name,
            prefix=str(plan.get("prefix", name)),
            metric=str(plan.get("metric", "accuracy")),
            trials_per_task=int(plan.get("trials_per_task", 0)),
            tasks=tuple(plan.get("tasks", found)),
            task_trials={t: int(n) for t, n in plan.get("task_trials", {}).items()},
            task_metrics={t: str(m) for t, m in plan.get("task_metrics", {}).items()},
            targets={t: tuple(s) for t, s in plan.get("targets", {}).items()},
            baselines={s: tuple(t) for s, t in plan.get("baselines", {}).items()},
            baseline_seeds=int(plan.get("baseline_seeds", 0)),
        )


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
    state: str  # "v2 @best", "waiting for a, b", "training", "failed", "not started"
    version: int | None = None
    missing: tuple[str, ...] = ()
    best: float | None = None  # the registered fusion's dev metric
    metric: str = ""  # the metric `best` is in (the registered fusion's `metric` tag)


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

    def render(self) -> str:
        """A compact plain-text table."""
        lines = [f"pipeline {self.name}  (tracking {safe_uri(self.tracking_uri)})"]
        if not self.experiment_found:
            lines.append("no runs yet (experiment not found)")
        task_rows = [("TASK", "DONE", "STOP", "RUN", "FAIL", "PEND", "BEST", "ADAPTER")]
        for t in self.tasks:
            best = metric_label(t.best, t.metric)
            counts = (t.done, t.stopped, t.running, t.failed, t.pending)
            version = version_label(t.adapter_version, t.adapter_aliases)
            task_rows.append((t.task, *map(str, counts), best, version))
        lines += _table(task_rows)
        if self.fusions:
            rows = [("FUSION", "ADAPTERS", "STATE", "BEST")]
            rows += [
                (
                    f.target,
                    ",".join(f.adapters),
                    f.state,
                    metric_label(f.best, f.metric or self.metric),
                )
                for f in self.fusions
            ]
            lines += ["", *_table(rows)]
        if self.baselines:
            rows = [("BASELINE", "TASK", "DONE", "RUN", "FAIL", "PEND", "MEAN")]
            for b in self.baselines:
                mean = metric_label(b.mean, b.metric or self.metric)
                counts = (b.done, b.running, b.failed, b.pending)
                rows.append((b.system, b.task, *map(str, counts), mean))
            lines += ["", *_table(rows)]
        return "\n".join(lines)


def _table(rows: Sequence[Sequence[str]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows
    ]


def pipeline_status(config: PipelineConfig, tracking_uri: str) -> PipelineStatus:
    """The status of `config`'s pipeline in the tracking store at `tracking_uri`."""
    return plan_status(StatusPlan.from_config(config), tracking_uri)


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
    return plan_status(plan, tracking_uri, records, started)


def plan_status(
    plan: StatusPlan,
    uri: str,
    records: Sequence[RunRecord] | None = None,
    started: float | None = None,
) -> PipelineStatus:
    started = time.perf_counter() if started is None else started
    runs = experiment_runs(uri, plan.name) if records is None else list(records)
    adapters = _by_task(list_models(uri, plan.prefix, "adapter")) if runs is not None else {}
    fusions = _by_task(list_models(uri, plan.prefix, "fusion")) if runs is not None else {}
    found = runs or []
    tasks = tuple(_task_status(plan, t, found, adapters.get(t)) for t in _tasks(plan))
    fusion_rows = tuple(
        _fusion_status(target, sources, adapters, fusions.get(target), found)
        for target, sources in plan.targets.items()
    )
    baselines = tuple(
        _baseline_status(plan, system, task, found)
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
    )


def _tasks(plan: StatusPlan) -> tuple[str, ...]:
    names = list(plan.tasks)
    for sources in plan.targets.values():
        names += [s for s in sources if s not in names]
    return tuple(names)


def _by_task(infos: Iterable[ModelVersionInfo]) -> dict[str, ModelVersionInfo]:
    return {info.task: info for info in infos if info.task}


def _grid_size(config: PipelineConfig, task: str | None = None) -> int:
    """Trials per task (`task`'s own grid where given): the grid's points, or the searcher's
    `num_samples`."""
    stage = config.adapters
    if stage.search != "grid":
        return stage.num_samples
    points = stage.grid_for(task)
    return len(points.reduction_factors) * len(points.learning_rates) * len(stage.seeds)


def task_trials(records: Sequence[RunRecord], task: str) -> list[RunRecord]:
    """The trials of `task`'s newest sweep run (by start time), one per trial id (its newest
    run); trials tagged with the task but without a parent when the task has no sweep run."""
    sweeps = [r for r in records if r.kind == "sweep" and r.task == task]
    if sweeps:
        parent = max(sweeps, key=lambda r: r.start_time).run_id
        trials = [r for r in records if r.kind == "trial" and r.parent_run_id == parent]
    else:
        trials = [r for r in records if r.kind == "trial" and r.task == task]
    newest: dict[str, RunRecord] = {}
    for run in trials:
        key = run.trial_id or run.run_id
        if key not in newest or run.start_time >= newest[key].start_time:
            newest[key] = run
    return list(newest.values())


def _task_status(
    plan: StatusPlan, task: str, records: Sequence[RunRecord], model: ModelVersionInfo | None
) -> TaskStatus:
    metric = plan.metric_for(task)
    trials = task_trials(records, task)
    stopped = [r for r in trials if r.stopped_early]
    trials = [r for r in trials if not r.stopped_early]
    scored = [(_score(r, metric), r) for r in trials if r.status not in FAILED]
    scored = [(s, r) for s, r in scored if s is not None]
    sign = 1.0 if higher_is_better(metric) else -1.0
    best = max(scored, key=lambda sr: sign * sr[0], default=None)
    return TaskStatus(
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


def _score(run: RunRecord, metric: str) -> float | None:
    """The trial's final best dev metric, else (still running) its latest dev metric."""
    value = run.metrics.get(f"best_dev_{metric}", run.metrics.get(f"dev_{metric}"))
    return None if value is None or value != value else value


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
    target: str,
    sources: Sequence[str],
    adapters: dict[str, ModelVersionInfo],
    model: ModelVersionInfo | None,
    records: Sequence[RunRecord],
) -> FusionStatus:
    sources = tuple(sources)
    if model is not None:
        text = version_label(model.version, model.aliases)
        metric = model.tags.get("metric") or ""
        best = number_from_tag(model.tags.get(f"dev_{metric}"))
        return FusionStatus(target, sources, text, version=model.version, best=best, metric=metric)
    missing = tuple(s for s in sources if BEST_ALIAS not in getattr(adapters.get(s), "aliases", ()))
    if missing:
        return FusionStatus(target, sources, f"waiting for {', '.join(missing)}", missing=missing)
    runs = [r for r in records if r.kind == "fusion" and r.task == target]
    latest = max(runs, key=lambda r: r.start_time, default=None)
    if latest is not None and latest.status in RUNNING:
        return FusionStatus(target, sources, "training")
    if latest is not None and latest.status in FAILED:
        return FusionStatus(target, sources, f"failed (run {latest.run_id})")
    return FusionStatus(target, sources, "not started")
