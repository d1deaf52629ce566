"""Each task's metrics, checked against its type before anything trains.

The rule: a task is selected on one metric (its best epoch and early stopping, the sweep's best
trial, the registered version's `metric` tag, the best fusion seed, the report). That metric is
the `metric` of the `training` mapping that applies to the task when one is given (the most
specific wins: `adapters.task_training.<task>.metric` over `adapters.training.metric`,
`baselines.system_training.<system>.metric` over `baselines.training.metric`,
`fusion.training.metric`), else the default of the task's type: `accuracy` for classification
and multiple choice, `pearson` for regression. A metric given for a stage must fit every task
the stage trains. A task's `metrics:` (what its dev set reports besides) must fit its type too.
`f1` on a task with more than two classes is macro-F1 and is recorded as `f1_macro`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from adapterfleet.config.fields import ConfigError
from adapterfleet.data import TaskSpec
from adapterfleet.training.config import higher_is_better as higher_is_better  # for results/
from adapterfleet.training.config import task_metric


def checked_task_metrics(tasks: Mapping[str, TaskSpec]) -> dict[str, TaskSpec]:
    """The tasks with their `metrics:` checked against their types (`f1` on more than two
    classes renamed `f1_macro`)."""
    out = {}
    for name, spec in tasks.items():
        where = f"tasks.{name}.metrics"
        names = [_checked(spec, m, where, "list metrics of its type") for m in spec.metrics]
        out[name] = replace(spec, metrics=tuple(dict.fromkeys(names)))
    return out


def given_metric(*places: tuple[Any, str], fix: str) -> tuple[Any, str, str] | None:
    """The metric of the first `(mapping, key)` place that gives one, most specific first: (the
    metric, its key, the fix a refusal suggests), or None when none gives one."""
    for mapping, key in places:
        if isinstance(mapping, Mapping) and mapping.get("metric") is not None:
            return mapping["metric"], key, fix.format(key=key)
    return None


def leave_out_fix(key: str) -> str:
    """The fix of a stage-wide metric that does not fit one of the stage's tasks."""
    return f"leave {key} out (each task then uses its type's default)"


def stage_metrics(
    tasks: Mapping[str, TaskSpec],
    trained: Iterable[str],
    given: Mapping[str, tuple[Any, str, str] | None],
) -> dict[str, str]:
    """Task -> the metric it is selected on in a stage, for every task of the config.

    `given[task]` is (the metric given for it, the key that gave it, the fix) or None. A given
    metric that does not fit a task the stage trains (`trained`) is refused; for a task the
    stage does not train, the type's default replaces it."""
    trained = set(trained)
    out = {}
    for name, spec in tasks.items():
        metric, where, fix = given.get(name) or (None, "", "")
        if metric is not None and name not in trained:
            try:
                task_metric(spec.kind, spec.num_labels, metric)
            except (TypeError, ValueError):
                metric = None
        out[name] = _checked(spec, metric, where, fix)
    return out


def _checked(spec: TaskSpec, metric: Any, where: str, fix: str) -> str:
    if metric is not None and not isinstance(metric, str):
        raise ConfigError(f"{where}: expected a metric name, got {metric!r}")
    try:
        return task_metric(spec.kind, spec.num_labels, metric)
    except ValueError as error:
        raise ConfigError(f"{where}: task {spec.name!r}: {error}; {fix}") from None
