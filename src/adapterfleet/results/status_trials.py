"""The trials `status` counts for a task, and the best dev metric so far of those that run."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import replace

from adapterfleet.config.task_metrics import higher_is_better
from adapterfleet.registry import RunRecord
from adapterfleet.registry.status import RUNNING, best_logged
from adapterfleet.registry.tags import TAG_CONFIG_HASH
from adapterfleet.results.status_notes import INTERRUPTED
from adapterfleet.results.status_plan import StatusPlan


def status_tasks(plan: StatusPlan) -> tuple[str, ...]:
    """The plan's tasks, then the other tasks its fusions take adapters of."""
    names = list(plan.tasks)
    for sources in plan.targets.values():
        names += [s for s in sources if s not in names]
    return tuple(names)


def with_best_so_far(plan: StatusPlan, uri: str, records: list[RunRecord]) -> list[RunRecord]:
    """Trials still running (or stopped mid-way) with `best_dev_<metric>`, their best dev
    metric so far, read from their history: the latest epoch, all the run's latest metrics
    hold, need not be the best (a finished trial logged its best itself)."""
    tasks = set(status_tasks(plan))
    unfinished: dict[str, list[str]] = {}
    for r in records:
        if r.kind == "trial" and r.task in tasks and r.status in (*RUNNING, INTERRUPTED, "KILLED"):
            metric = plan.metric_for(r.task)
            if f"dev_{metric}" in r.metrics and f"best_dev_{metric}" not in r.metrics:
                unfinished.setdefault(metric, []).append(r.run_id)
    best: dict[str, dict[str, float]] = {}
    for metric, run_ids in unfinished.items():
        found = best_logged(uri, run_ids, f"dev_{metric}", higher_is_better(metric))
        for run_id, value in found.items():
            best[run_id] = {f"best_dev_{metric}": value}
    return [
        replace(r, metrics={**r.metrics, **best[r.run_id]}) if r.run_id in best else r
        for r in records
    ]


def swept_with(records: Sequence[RunRecord], task: str, hashes: Collection[str]) -> bool:
    """Whether `task` has a sweep run of the settings `hashes` names (its trials are this
    config's, not the newest of another's that `task_trials` falls back to)."""
    return any(
        r.kind == "sweep" and r.task == task and r.tags.get(TAG_CONFIG_HASH) in hashes
        for r in records
    )


def task_trials(
    records: Sequence[RunRecord], task: str, hashes: Collection[str] = ()
) -> list[RunRecord]:
    """The trials of `task`'s newest sweep run (by start time) of the settings `hashes` names
    (its config hashes; any settings where none of its sweeps has them), one per trial id (its
    newest run); trials tagged with the task but without a parent when it has no sweep run.
    The newest of any settings counted another config's trials for this one (all failed)."""
    sweeps = [r for r in records if r.kind == "sweep" and r.task == task]
    ours = [r for r in sweeps if r.tags.get(TAG_CONFIG_HASH) in hashes]
    sweeps = ours or sweeps
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
