"""A grid of its own for one task (`adapters.task_grid`), in one real sweep (local Ray, SQLite
MLflow, tiny BERT): fruit tries rf {4, 8} at lr 0.01 and water rf 16 at lr 0.02, with ASHA, so
that the per-task scheduler reads the task from the listed points too."""

from __future__ import annotations

from pathlib import Path

import pytest
from tuning_support import config_document, expected_best, runs_of

from adapterfleet.config import parse_config
from adapterfleet.orchestration.sweep import run_adapter_stage
from adapterfleet.results.status import StatusPlan, pipeline_status

pytestmark = pytest.mark.integration


def test_each_task_sweeps_its_own_grid_and_registers_its_best(
    ray_local: None, tiny_model: Path, tmp_path: Path
) -> None:
    own = {"water": {"reduction_factors": [16], "learning_rates": [0.02]}}
    document = config_document(tmp_path, tiny_model, task_grid=own, scheduler="asha")
    config = parse_config(document, tmp_path)
    lines: list[str] = []
    registered = run_adapter_stage(config, progress=lines.append)
    uri = config.tracking_uri

    trial_runs = runs_of(uri, "trial")
    assert sorted(r.data.tags["adapterfleet.trial_id"] for r in trial_runs) == [
        "fruit-rf4-lr0.01-s0",
        "fruit-rf8-lr0.01-s0",
        "water-rf16-lr0.02-s0",
    ], lines
    assert all(r.info.status == "FINISHED" for r in trial_runs)
    water = registered["water"]
    assert (water.tags["reduction_factor"], float(water.tags["learning_rate"])) == ("16", 0.02)
    assert water.tags["adapterfleet.trial_id"] == "water-rf16-lr0.02-s0"
    assert registered["fruit"].tags["adapterfleet.trial_id"] == expected_best(trial_runs, "fruit")
    sweeps = {r.data.tags["adapterfleet.task"]: r.data.params for r in runs_of(uri, "sweep")}
    assert (sweeps["water"]["reduction_factors"], sweeps["fruit"]["reduction_factors"]) == (
        "[16]",
        "[4, 8]",
    )

    status = {t.task: t for t in pipeline_status(config, uri).tasks}
    assert {task: s.total for task, s in status.items()} == {"fruit": 2, "water": 1}
    assert all(s.done + s.stopped == s.total and s.pending == 0 for s in status.values())
    plan = StatusPlan.from_config(config)  # `status NAME` reads the same totals from the tag
    assert StatusPlan.from_tags(config.name, plan.to_tags(), []) == plan
