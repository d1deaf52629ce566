"""The rows of the summary table a pipeline run ends with, in the config's order."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from adapterfleet.config import PipelineConfig
from adapterfleet.results.formats import number_from_tag, version_label
from adapterfleet.training.metrics import signed

if TYPE_CHECKING:
    from adapterfleet.orchestration.pipeline import PipelineSummary


def summary_rows(config: PipelineConfig, summary: PipelineSummary) -> list[dict[str, Any]]:
    """Per task its registered adapter; per fusion target the fusion beside the target's ST-A
    on the dev metric, with its gain (an improvement: lower is better for mse); per baseline job
    its dev metric. Each task in its own metric's column. Tasks, targets and systems in the
    config's order, whatever order they ended in."""
    rows: list[dict[str, Any]] = []
    for task in _ordered(summary.adapters, config.tasks):
        info, metric = summary.adapters[task], config.adapters.training_for(task).metric
        rows.append(
            {
                "task": task,
                "kind": "adapter",
                "version": version_label(info.version),
                "rf": info.tags.get("reduction_factor", ""),
                "lr": info.tags.get("learning_rate", ""),
                f"dev {metric}": _cell(number_from_tag(info.tags.get("metric_value"))),
            }
        )
    for target in _ordered(summary.fusions, config.fusion.targets):
        outcome, st_a = summary.fusions[target], summary.adapters.get(target)
        metric = config.adapters.training_for(target).metric  # what the ST-A was selected on
        value = outcome.dev_metrics.get(metric)
        base = number_from_tag(st_a.tags.get("metric_value")) if st_a else None
        both = base is not None and value is not None
        gain = signed(metric, value) - signed(metric, base) if both else None
        rows.append(
            {
                "task": target,
                "kind": "fusion",
                "version": version_label(outcome.version.version),
                "rf": "",
                "lr": "",
                f"dev {metric}": value,
                f"st-a {metric}": _cell(base),
                "gain": f"{gain:+.4f}" if gain is not None else "",
            }
        )
    rows += _baseline_rows(config, summary)
    return rows


def summary_columns(rows: list[dict[str, Any]]) -> list[str]:
    """The table's columns: each row's own (task, kind, version, rf, lr), then per metric its
    dev and st-a columns side by side, in the order the metrics first appear, then the gain,
    which each fusion row fills for its own metric. A fleet of one task type reads as before
    (dev, st-a, gain); a mixed one kept first-seen order, which put the gain between the
    metrics' ST-A columns."""
    seen = list(dict.fromkeys(key for row in rows for key in row))
    metrics = dict.fromkeys(k.split(" ", 1)[1] for k in seen if k.startswith(("dev ", "st-a ")))
    paired = [c for m in metrics for c in (f"dev {m}", f"st-a {m}") if c in seen]
    lead = [c for c in seen if c not in paired and c != "gain"]
    return lead + paired + (["gain"] if "gain" in seen else [])


def _baseline_rows(config: PipelineConfig, summary: PipelineSummary) -> list[dict[str, Any]]:
    systems = list(config.baselines.systems)
    outcomes = sorted(
        summary.baselines.outcomes,
        key=lambda o: (systems.index(o.job.system) if o.job.system in systems else 99, o.job.seed),
    )
    rows = []
    for outcome in outcomes:
        for task in _ordered(outcome.dev_metrics, config.tasks):
            metric = config.baselines.training_for(outcome.job.system, task).metric
            rows.append(
                {
                    "task": task,
                    "kind": f"{outcome.job.system} s{outcome.job.seed}",
                    "version": "",
                    "rf": "",
                    "lr": "",
                    f"dev {metric}": outcome.dev_metrics[task].get(metric),
                }
            )
    return rows


def _ordered(present: Any, order: Any) -> list[str]:
    """The keys of `present` in the order of `order`, any others after them."""
    known = [key for key in order if key in present]
    return known + [key for key in present if key not in known]


def _cell(value: float | None) -> float | str:
    """A number for the table, or an empty cell."""
    return "" if value is None else value
