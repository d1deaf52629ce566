"""What `status` and `report` know of a pipeline without its config: the plan `adapterfleet run`
keeps as a tag on the pipeline's experiment (tasks, grid size, fusion targets, baselines)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from adapterfleet.config import PipelineConfig
from adapterfleet.registry import RunRecord

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
    # where the plan came from, as a note says it; not part of what the plan is (a plan read
    # back from the experiment's tag equals the config's)
    source: str = field(default="this config", compare=False)
    # task -> the config hashes of its current settings (`tuning.spec.task_config_hashes`),
    # where the caller knows them: its sweeps of these settings are the ones counted
    config_hashes: dict[str, tuple[str, ...]] = field(default_factory=dict, compare=False)

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
            source="the last run's plan",
        )


def _grid_size(config: PipelineConfig, task: str | None = None) -> int:
    """Trials per task (`task`'s own grid where given): the grid's points, or the searcher's
    `num_samples`."""
    stage = config.adapters
    if stage.search != "grid":
        return stage.num_samples
    points = stage.grid_for(task)
    return len(points.reduction_factors) * len(points.learning_rates) * len(stage.seeds)
