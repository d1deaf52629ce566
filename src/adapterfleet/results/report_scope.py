"""Which runs a report of a config counts: those made with the settings the config gives now.

A re-run with other settings (a budget, `--set`, an edited config, another user's config under
the same pipeline name) leaves runs in the same experiment; averaging them with this config's
would make one cell of two settings. Each run names its settings by a hash the pipeline computes
from the config (`orchestration.report_scope` works out this config's):

- a sweep trial: its parent sweep run's `config_hash` tag (`tuning.spec.task_config_hash`);
- a fusion run: its id, `fusion-<target>-<lineage key>` (`orchestration.fusion_plan`), one per
  fusion seed, over the adapter versions registered for the config's adapter settings;
- a baseline run: its job id, `<system>-<task>-s<seed>-<key>` (`orchestration.baseline_plan`).

Runs of a task, target or system the config does not declare are left out too. Plain data in,
plain data out: no MLflow here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from adapterfleet.registry import (
    TAG_KIND,
    TAG_PARENT_RUN,
    TAG_SYSTEM,
    TAG_TASK,
    TAG_TRIAL_ID,
    RunData,
)
from adapterfleet.registry.tags import TAG_CONFIG_HASH, TAG_PRUNED_FROM
from adapterfleet.results.report_data import TITLES
from adapterfleet.results.status_plan import StatusPlan

OTHER_SETTINGS = "made with other settings than the config's left out"
UNDECLARED = "left out (the config does not declare this task and system)"


@dataclass(frozen=True)
class ReportScope:
    """The settings of one config, as the hashes its runs carry."""

    plan: StatusPlan
    # task -> the config hashes of its settings (`tuning.spec.task_config_hashes`)
    sweeps: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    # target -> the fusion ids of its seeds (empty: no adapter registered for the settings)
    fusions: Mapping[str, frozenset[str]] = field(default_factory=dict)
    # (task, system) -> the baseline job ids of its seeds
    baselines: Mapping[tuple[str, str], frozenset[str]] = field(default_factory=dict)
    # the experiment tags a run of the config sets: its budget and `--set` overrides, which the
    # report states (the experiment's own are the last run's, under a shared name another's)
    tags: Mapping[str, str] = field(default_factory=dict)
    # task -> what a model that learned nothing scores on its dev split, as a note on a score:
    # `note(metric, value)` is "; no better than always answering 'no' (0.5200 of dev)" or ""
    chance: Mapping[str, Callable[[str, float], str]] = field(default_factory=dict)


def in_scope(
    runs: Sequence[RunData], scope: ReportScope, sweeps: Iterable[RunData]
) -> tuple[list[RunData], list[str], int]:
    """The `runs` made with the scope's settings (in their order), a note per cell on what was
    left out, and how many runs were left out for other settings; `sweeps`: the experiment's
    sweep runs, whose hashes the trials carry."""
    hashes = {s.run_id: s.tags.get(TAG_CONFIG_HASH) for s in sweeps}
    kept: list[RunData] = []
    left: dict[tuple[str, str, str], int] = {}
    for run in runs:
        why = _left_out(run, scope, hashes)
        if why is None:
            kept.append(run)
        else:
            where = (run.tags.get(TAG_TASK) or "(no task)", _system(run), why)
            left[where] = left.get(where, 0) + 1
    notes = [
        f"{task} / {TITLES.get(system, system)}: {n} run(s) {why}"
        for (task, system, why), n in left.items()
    ]
    other = sum(n for (_, _, why), n in left.items() if why == OTHER_SETTINGS)
    return kept, notes, other


def _left_out(run: RunData, scope: ReportScope, hashes: Mapping[str, str | None]) -> str | None:
    """Why `run` does not count for the scope's config; None when it does."""
    kind, task = run.tags.get(TAG_KIND), run.tags.get(TAG_TASK, "")
    run_id = run.tags.get(TAG_TRIAL_ID)
    if kind == "trial":
        if task not in scope.sweeps:
            return UNDECLARED
        made_with = hashes.get(run.tags.get(TAG_PARENT_RUN, ""))
        return None if made_with in scope.sweeps[task] else OTHER_SETTINGS
    if kind == "fusion":
        if TAG_PRUNED_FROM in run.tags:  # no Table 1 cell either way (`fusion_cells`)
            return None
        if task not in scope.fusions:
            return UNDECLARED
        return None if run_id in scope.fusions[task] else OTHER_SETTINGS
    ids = scope.baselines.get((task, _system(run)))
    if ids is None:
        return UNDECLARED
    return None if run_id in ids else OTHER_SETTINGS


def _system(run: RunData) -> str:
    """The Table 1 column a run would fill."""
    kind = run.tags.get(TAG_KIND)
    if kind == "trial":
        return "st-a-houlsby" if run.value("architecture") == "houlsby" else "st-a"
    if kind == "fusion":
        return "fusion-st-a"
    return run.tags.get(TAG_SYSTEM, "")
