"""The summary table `adapterfleet run` ends with (`orchestration/summary.py`), printed as the
command prints it: per fusion its dev metric, its target's ST-A and the gain, each task in its
own metric's columns. The registry's and the fusion stage's records are the real dataclasses,
filled as a run fills them."""

from __future__ import annotations

import pytest

from adapterfleet.cli.output import metrics_table
from adapterfleet.config import PipelineConfig
from adapterfleet.orchestration.fusion_job import FusionOutcome
from adapterfleet.orchestration.pipeline import PipelineSummary
from adapterfleet.orchestration.summary import summary_columns, summary_rows
from adapterfleet.registry import ModelVersionInfo


def _summary(config: PipelineConfig, dev: dict[str, tuple[str, float, float]]) -> PipelineSummary:
    """Each task of `dev` (task -> metric, ST-A value, fusion value) registered as an adapter
    and fused."""
    summary = PipelineSummary(config.name, config.tracking_uri)
    for task, (metric, st_a, fused) in dev.items():
        tags = {"reduction_factor": "4", "learning_rate": "0.01", "metric_value": str(st_a)}
        summary.adapters[task] = ModelVersionInfo(
            f"{config.registry_prefix}.adapter.{task}", 1, "", None, ("best",), tags
        )
        version = ModelVersionInfo(f"{config.registry_prefix}.fusion.{task}", 1, "", None)
        summary.fusions[task] = FusionOutcome(task, version, {metric: fused}, True, 0.0, 0.0)
    return summary


def _header(rows: list[dict], capsys: pytest.CaptureFixture[str]) -> list[str]:
    metrics_table(rows, summary_columns(rows))
    return [cell.strip() for cell in capsys.readouterr().out.splitlines()[0].strip("|").split("|")]


def test_a_mixed_fleet_keeps_each_metrics_columns_together_and_the_gain_last(
    config: PipelineConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    """A regression and a classification fusion printed `dev pearson | dev accuracy | st-a
    pearson | gain | st-a accuracy`: the gain sat between the two metrics' ST-A columns."""
    dev = {"score": ("pearson", 0.5, 0.625), "fruit": ("accuracy", 0.75, 0.8125)}
    rows = summary_rows(config, _summary(config, dev))
    assert _header(rows, capsys) == [
        "task", "kind", "version", "rf", "lr",
        "dev accuracy", "st-a accuracy", "dev pearson", "st-a pearson", "gain",
    ]  # fmt: skip
    gains = {row["task"]: row["gain"] for row in rows if row["kind"] == "fusion"}
    assert gains == {"fruit": "+0.0625", "score": "+0.1250"}


def test_a_fleet_of_one_task_type_reads_as_before(
    config: PipelineConfig, capsys: pytest.CaptureFixture[str]
) -> None:
    dev = {"fruit": ("accuracy", 0.75, 0.8125), "water": ("accuracy", 0.5, 0.4375)}
    rows = summary_rows(config, _summary(config, dev))
    assert _header(rows, capsys) == [
        "task", "kind", "version", "rf", "lr", "dev accuracy", "st-a accuracy", "gain",
    ]  # fmt: skip
