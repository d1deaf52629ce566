"""The runs `report -c CONFIG` counts: the settings hashes the pipeline computes for the config's
tasks, fusion targets and baselines, worked out the same way (`results.report_scope` says how
the report uses them). No torch, no Ray: the report starts without them."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

from adapterfleet.config import PipelineConfig
from adapterfleet.orchestration.baseline_plan import ALL_TASKS, plan_baselines
from adapterfleet.orchestration.fusion_plan import fusion_id, lineage_key, seed_configs
from adapterfleet.orchestration.pipeline_tags import pipeline_tags
from adapterfleet.registry import ModelVersionInfo, adapter_model_name, get_version
from adapterfleet.registry.tags import BEST_ALIAS
from adapterfleet.results.report_scope import ReportScope
from adapterfleet.results.status_plan import StatusPlan
from adapterfleet.tuning.plan import current_keys, earlier_adapter, is_current
from adapterfleet.tuning.spec import task_config_hashes

if TYPE_CHECKING:
    from adapterfleet.data.tasks import TaskSpec
    from adapterfleet.results.status import PipelineStatus


def config_status(config: PipelineConfig, uri: str | None = None) -> PipelineStatus:
    """`status -c CONFIG` from Python: the pipeline's state in the config's store (or `uri`),
    with the trials of the config's settings counted and its registered adapters trained with
    other settings said, as the CLI prints it (`.render()`)."""
    from adapterfleet.results.status import pipeline_status
    from adapterfleet.tuning.settings import other_settings

    hashes = {task: task_config_hashes(config, task) for task in config.adapter_tasks}
    settings = partial(other_settings, config)
    return pipeline_status(config, uri or config.tracking_uri, settings, hashes)


def report_scope(
    config: PipelineConfig, uri: str | None = None, overrides: Sequence[str] = ()
) -> ReportScope:
    """The config's plan and the hashes its runs carry (the fusions' read from the registry at
    `uri`, the config's store by default: the adapter versions registered for the config's
    adapter settings and data); `overrides`: the `--set` changes the config was read with."""
    uri = uri or config.tracking_uri
    return ReportScope(
        plan=StatusPlan.from_config(config),
        sweeps={task: task_config_hashes(config, task) for task in config.adapter_tasks},
        fusions={t: fusion_ids(config, t, uri) for t in config.fusion.targets},
        baselines=baseline_ids(config),
        tags=pipeline_tags(config, overrides),
        chance=chance_notes(config),
    )


def _dev_labels(spec: TaskSpec) -> list[Any] | None:
    """The labels of a task's dev split; None where its data cannot be read here (moved)."""
    from adapterfleet.data import TaskError, load_task

    try:
        return list(load_task(spec).dev["label"])
    except (TaskError, OSError):
        return None


def chance_notes(config: PipelineConfig) -> dict[str, Callable[[str, float], str]]:
    """Task -> the note on a score no better than what learning nothing scores on its dev
    split (`data.baseline`); a task whose data cannot be read here gets none."""
    from adapterfleet.data.baseline import dev_mean, majority

    notes: dict[str, Callable[[str, float], str]] = {}
    data_log = logging.getLogger("adapterfleet.data")  # its warnings were said when it trained
    level = data_log.level
    data_log.setLevel(logging.ERROR)
    try:
        loaded = {task: _dev_labels(spec) for task, spec in config.tasks.items()}
    finally:
        data_log.setLevel(level)
    for task, labels in loaded.items():
        spec = config.tasks[task]
        if labels is None:
            continue
        chance = dev_mean(labels) if spec.is_regression else majority(labels, spec.label_names)
        if chance is not None:
            notes[task] = chance.note
    return notes


def fusion_ids(config: PipelineConfig, target: str, uri: str) -> frozenset[str]:
    """The id of each seed's fusion of `target` over the adapters a run of the config would
    fuse now; empty when one of them has no version registered for its settings and data."""
    versions = {}
    for task in config.fusion.targets[target]:
        version = current_adapter(config, task, uri)
        if version is None:
            return frozenset()
        versions[task] = version
    return frozenset(
        fusion_id(target, lineage_key(seeded, target, versions, by_path=by_path))
        for seeded in seed_configs(config)
        for by_path in (False, True)  # True: a fusion run from before the paths were left out
    )


def current_adapter(config: PipelineConfig, task: str, uri: str) -> ModelVersionInfo | None:
    """The version of the task's adapter registered for the config's settings and data, as the
    adapter stage picks it: `best` when it is that one, else the newest other that is."""
    keys = current_keys(config, task)
    best = get_version(uri, adapter_model_name(config.registry_prefix, task), alias=BEST_ALIAS)
    if best is not None and is_current(best, keys):
        return best
    return earlier_adapter(uri, config, task, keys)


def baseline_ids(config: PipelineConfig) -> dict[tuple[str, str], frozenset[str]]:
    """(task, system) -> the job ids of its baseline runs; MT-A's per-task runs are its joint
    job's id and the task."""
    ids: dict[tuple[str, str], set[str]] = {}
    for job in plan_baselines(config):
        if job.task == ALL_TASKS:
            for task in config.adapter_tasks:
                ids.setdefault((task, job.system), set()).add(f"{job.job_id}-{task}")
        else:
            ids.setdefault((job.task, job.system), set()).add(job.job_id)
    return {cell: frozenset(found) for cell, found in ids.items()}
