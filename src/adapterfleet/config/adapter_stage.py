"""`adapters:`, the sweep stage: what each task's grid (or searcher) tries, and how it is scheduled.

The checks of the section sit with its class: `AdapterStage.from_mapping` reads and validates the
raw mapping against the pipeline's tasks, in the order the messages have always come in.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from adapterfleet.config.fields import (
    ConfigError,
    as_float,
    as_int,
    as_mapping,
    as_positive,
    check_tasks,
    choice,
    distinct,
    list_at,
    refuse_unknown,
    seeds_at,
    training_at,
    trainings_at,
)
from adapterfleet.config.task_metrics import given_metric, leave_out_fix, stage_metrics
from adapterfleet.data import TaskSpec
from adapterfleet.training.config import TrainConfig

ADAPTER_DEFAULTS = {"learning_rate": 1e-4, "max_epochs": 30, "patience": 3}
SEARCHES = ("grid", "optuna")
SCHEDULERS = ("fifo", "asha")
# Keys that only mean something with a given search / scheduler.
OPTUNA_KEYS = ("num_samples", "learning_rate_range")
ASHA_KEYS = ("asha_grace_period", "asha_reduction")
ADAPTER_KEYS = (
    "architecture",
    "reduction_factors",
    "learning_rates",
    "tasks",
    "seeds",
    "training",
    "task_training",
    "task_grid",
    "search",
    "scheduler",
    *OPTUNA_KEYS,
    *ASHA_KEYS,
)


@dataclass(frozen=True)
class TaskGrid:
    """The reduction factors and learning rates a grid sweep tries for one task."""

    reduction_factors: tuple[int, ...]
    learning_rates: tuple[float, ...]

    @classmethod
    def per_task(
        cls, raw: Any, tasks: Mapping[str, TaskSpec], default: TaskGrid
    ) -> dict[str, TaskGrid]:
        """`adapters.task_grid`: per task, the reduction factors and/or learning rates its grid
        tries instead of the stage's (e.g. a wide adapter for a small target, trained slower)."""
        per_task = as_mapping(raw, "adapters.task_grid")
        check_tasks(list(per_task), tasks, "adapters.task_grid")
        grids = {}
        for task, changes in per_task.items():
            where = f"adapters.task_grid.{task}"
            changes = as_mapping(changes, where)
            refuse_unknown(changes, ("reduction_factors", "learning_rates"), where)
            rfs = list_at(changes, "reduction_factors", list(default.reduction_factors), where)
            lrs = list_at(changes, "learning_rates", list(default.learning_rates), where)
            grids[str(task)] = cls(
                distinct([as_int(v, f"{where}.reduction_factors", 1) for v in rfs], where),
                distinct([as_positive(v, f"{where}.learning_rates") for v in lrs], where),
            )
        return grids


@dataclass(frozen=True)
class AdapterStage:
    architecture: str = "pfeiffer"
    reduction_factors: tuple[int, ...] = (2, 16, 64)
    learning_rates: tuple[float, ...] = (1e-4,)
    tasks: tuple[str, ...] = ()
    seeds: tuple[int, ...] = (0,)
    training: TrainConfig = field(default_factory=lambda: TrainConfig(**ADAPTER_DEFAULTS))
    task_training: dict[str, TrainConfig] = field(default_factory=dict)
    task_grid: dict[str, TaskGrid] = field(default_factory=dict)  # grid search: per-task points
    search: str = "grid"  # grid: every point; optuna: `num_samples` trials per task
    num_samples: int = 8
    learning_rate_range: tuple[float, float] | None = None  # optuna: log-uniform, else categorical
    scheduler: str = "fifo"  # fifo: every trial runs to its end; asha: early stopping per task
    asha_grace_period: int = 1  # epochs before ASHA may stop a trial
    asha_reduction: float = 4.0  # ASHA keeps the best 1/asha_reduction at each rung
    task_metrics: dict[str, str] = field(default_factory=dict)  # task -> its metric (resolved)

    def training_for(self, task: str) -> TrainConfig:
        """The training settings of `task`: `training`, with that task's `task_training` changes
        and its metric (the one given for it, else its type's default; config/task_metrics.py)."""
        training = self.task_training.get(task, self.training)
        metric = self.task_metrics.get(task, training.metric)
        return training if metric == training.metric else replace(training, metric=metric)

    def grid_for(self, task: str | None) -> TaskGrid:
        """The grid of `task`: its `task_grid` entry, else (and for None) `reduction_factors` ×
        `learning_rates`."""
        default = TaskGrid(self.reduction_factors, self.learning_rates)
        return self.task_grid.get(task, default) if task else default

    @classmethod
    def from_mapping(cls, raw: Any, tasks: Mapping[str, TaskSpec]) -> AdapterStage:
        """The `adapters:` section, checked against the pipeline's `tasks`."""
        raw = as_mapping(raw, "adapters")
        refuse_unknown(raw, ADAPTER_KEYS, "adapters")
        architecture = raw.get("architecture", "pfeiffer")
        if architecture not in ("pfeiffer", "houlsby"):
            raise ConfigError(
                f"adapters.architecture: {architecture!r} is unknown; use pfeiffer or houlsby"
            )
        rfs = distinct(
            [
                as_int(v, "adapters.reduction_factors", 1)
                for v in list_at(raw, "reduction_factors", [2, 16, 64], "adapters")
            ],
            "adapters.reduction_factors",
        )
        lrs = distinct(
            [
                as_positive(v, "adapters.learning_rates")
                for v in list_at(raw, "learning_rates", [1e-4], "adapters")
            ],
            "adapters.learning_rates",
        )
        seeds = seeds_at(raw, "adapters.seeds")
        names = tuple(str(t) for t in list_at(raw, "tasks", list(tasks), "adapters"))
        check_tasks(names, tasks, "adapters.tasks")
        training_raw = as_mapping(raw.get("training") or {}, "adapters.training")
        base = {**ADAPTER_DEFAULTS, **training_raw}
        per_task = as_mapping(raw.get("task_training") or {}, "adapters.task_training")
        check_tasks(list(per_task), tasks, "adapters.task_training")
        metrics = _task_metrics(tasks, names, training_raw, per_task)
        training = training_at(base, {}, "adapters.training")
        task_training = trainings_at(per_task, base, "adapters.task_training")
        lrs, seeds, task_grid = _sweep_lists(
            raw, training_raw, per_task, training, task_training, tasks, rfs, lrs, seeds
        )
        stage = cls(architecture, rfs, lrs, names, seeds, training, task_training, task_grid)
        return replace(stage, task_metrics=metrics)._with_search(raw)

    def _with_search(self, raw: Mapping[str, Any]) -> AdapterStage:
        """`search`, `scheduler` and their knobs; keys of an unused method are refused."""
        search = choice(raw.get("search", "grid"), SEARCHES, "adapters.search")
        scheduler = choice(raw.get("scheduler", "fifo"), SCHEDULERS, "adapters.scheduler")
        _only_with(raw, OPTUNA_KEYS, search == "optuna", "search: optuna")
        _only_with(raw, ("task_grid",), search == "grid", "search: grid")
        _only_with(raw, ASHA_KEYS, scheduler == "asha", "scheduler: asha")
        if search == "optuna" and importlib.util.find_spec("optuna") is None:
            raise ConfigError(
                "adapters.search: optuna is not installed; pip install 'adapterfleet[optuna]'"
            )
        lr_range = None
        if "learning_rate_range" in raw:
            if "learning_rates" in raw:
                raise ConfigError(
                    "adapters.learning_rate_range: give it or adapters.learning_rates, not both"
                )
            lr_range = _lr_range(raw["learning_rate_range"])
        grace = as_int(raw.get("asha_grace_period", 1), "adapters.asha_grace_period", 1)
        reduction = as_float(raw.get("asha_reduction", 4), "adapters.asha_reduction")
        if reduction <= 1:
            raise ConfigError(f"adapters.asha_reduction: expected a number > 1, got {reduction}")
        if scheduler == "asha":
            self._check_grace(grace)
        return replace(
            self,
            search=search,
            num_samples=as_int(raw.get("num_samples", 8), "adapters.num_samples", 1),
            learning_rate_range=lr_range,
            scheduler=scheduler,
            asha_grace_period=grace,
            asha_reduction=reduction,
        )

    def _check_grace(self, grace: int) -> None:
        """ASHA's grace period fits in every task's `max_epochs`."""
        for task in self.tasks:
            epochs = self.training_for(task).max_epochs
            if grace > epochs:
                raise ConfigError(
                    f"adapters.asha_grace_period: {grace} is more than the {epochs} max_epochs "
                    f"of task {task!r}; lower it"
                )


def _sweep_lists(
    raw: Mapping[str, Any],
    training_raw: Mapping[str, Any],
    per_task: Mapping[str, Any],
    training: TrainConfig,
    task_training: Mapping[str, TrainConfig],
    tasks: Mapping[str, TaskSpec],
    rfs: tuple[int, ...],
    lrs: tuple[float, ...],
    seeds: tuple[int, ...],
) -> tuple[tuple[float, ...], tuple[int, ...], dict[str, TaskGrid]]:
    """The learning rates, seeds and task grids of the sweep. A trial takes its learning rate
    and seed from them, never from a training mapping: what `training` or `task_training`
    gives is the list where it was left out, and is checked against it otherwise (`_taken`)."""
    lr_range = _lr_range(raw["learning_rate_range"]) if "learning_rate_range" in raw else None
    listed = "adapters.learning_rates" if "learning_rates" in raw else None
    where = "adapters.training"
    lr = training.learning_rate
    lrs = _taken(where, training_raw, "learning_rate", lr, lrs, listed, lr_range)
    listed = "adapters.seeds" if "seeds" in raw else None
    seeds = _taken(where, training_raw, "seed", training.seed, seeds, listed)
    task_grid = TaskGrid.per_task(raw.get("task_grid") or {}, tasks, TaskGrid(rfs, lrs))
    for task, changes in per_task.items():
        where, own = f"adapters.task_training.{task}", task_training[task]
        _taken(where, changes, "seed", own.seed, seeds, "adapters.seeds")
        grid = task_grid.get(task, TaskGrid(rfs, lrs))
        if raw.get("search", "grid") == "grid":
            given = "learning_rates" in ((raw.get("task_grid") or {}).get(task) or {})
            listed = f"adapters.task_grid.{task}.learning_rates" if given else None
        else:  # no grid per task: the stage's list or range
            listed = "adapters.learning_rates"
        lr = own.learning_rate
        taken = _taken(where, changes, "learning_rate", lr, grid.learning_rates, listed, lr_range)
        if taken != grid.learning_rates:
            task_grid = {**task_grid, task: replace(grid, learning_rates=taken)}
    return lrs, seeds, task_grid


def _taken(
    where: str,
    given: Mapping[str, Any],
    key: str,
    value: Any,
    points: tuple[Any, ...],
    listed: str | None,
    lr_range: tuple[float, float] | None = None,
) -> tuple[Any, ...]:
    """The values a sweep tries for `key` (learning_rate, seed): `points`, its list (named
    `listed`; None: left out) or the learning rates' range. A trial never takes `key` from a
    training mapping (`given`, at `where`): a value given there is the list when the list is
    left out, and must be one of its values otherwise (it was taken and silently not used)."""
    if key not in given:
        return points
    if lr_range is not None and key == "learning_rate":
        if lr_range[0] <= value <= lr_range[1]:
            return points
        raise ConfigError(
            f"{where}.{key}: {value:g} is outside adapters.learning_rate_range "
            f"{list(lr_range)}, from which the sweep draws each trial's learning rate; move the "
            f"range, or remove {where}.{key}"
        )
    if listed is None:
        return (value,)
    if value in points:
        return points
    raise ConfigError(
        f"{where}.{key}: {value:g} is not one of {listed} {list(points)}, the values the "
        f"sweep's trials take; list it there, set it to one of them (-o {where}.{key}="
        f"{points[0]:g}), or remove {where}.{key}"
    )


def _task_metrics(
    tasks: Mapping[str, TaskSpec],
    names: Sequence[str],
    training: Mapping[str, Any],
    per_task: Mapping[str, Any],
) -> dict[str, str]:
    """Each task's metric: `task_training.<task>.metric`, else `training.metric`, else the
    default of its type; checked against the type of every task the stage trains."""
    given = {}
    for task in tasks:
        specific = f"adapters.task_training.{task}.metric"
        given[task] = given_metric(
            (per_task.get(task), specific),
            (training, "adapters.training.metric"),
            fix=f"set {specific} to one of them, or " + leave_out_fix("{key}"),
        )
    return stage_metrics(tasks, names, given)


def _only_with(raw: Mapping[str, Any], keys: Sequence[str], used: bool, needs: str) -> None:
    given = [k for k in keys if k in raw]
    if given and not used:
        raise ConfigError(
            f"adapters.{given[0]}: only used with adapters.{needs}; set that or remove the key"
        )


def _lr_range(value: Any) -> tuple[float, float]:
    where = "adapters.learning_rate_range"
    if not isinstance(value, list) or len(value) != 2:
        raise ConfigError(f"{where}: expected [low, high], got {value!r}")
    low, high = (as_float(v, where) for v in value)
    if not 0 < low < high:
        raise ConfigError(f"{where}: expected 0 < low < high, got [{low}, {high}]")
    return low, high
