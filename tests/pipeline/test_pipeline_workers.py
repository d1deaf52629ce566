"""`adapterfleet run` with trials of two workers (issue #23): each trial is a Ray Train run of two
gloo processes on the local Ray; the adapters are registered and the fusion starts as today."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from tuning_support import config_document, runs_of, write_config

from adapterfleet.config import load_config

pytestmark = pytest.mark.integration


def test_run_with_two_worker_trials_registers_the_adapters_and_fuses(tmp_path, tiny_model):
    document = config_document(tmp_path, tiny_model, reduction_factors=[4])
    document["resources"] = {"cpu": 1, "workers": 2}
    document["fusion"] = {"targets": {"fruit": "all"}, "training": {"max_epochs": 2}}
    path = write_config(tmp_path, document)
    command = Path(sys.executable).with_name("adapterfleet")
    result = subprocess.run(
        [str(command), "run", str(path), "--num-cpus", "2"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        capture_output=True,
        text=True,
        timeout=900,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-3000:]
    for task in ("fruit", "water"):
        assert f"task {task}: registered tinysweep.adapter.{task} v1" in output, output
        assert f"trial {task}-rf4-lr0.01-s0 epoch 2/2" in output
    assert "registered tinysweep.fusion.fruit v1" in output
    config = load_config(path)
    trials = runs_of(config.tracking_uri, "trial")
    assert sorted(r.data.tags["adapterfleet.trial_id"] for r in trials) == [
        "fruit-rf4-lr0.01-s0",
        "water-rf4-lr0.01-s0",
    ]
    assert {r.info.status for r in trials} == {"FINISHED"}
    # Ray Train's own run of each trial, under the pipeline's storage
    assert len(list((config.storage / "ray" / "train").glob("*/*-rf4-lr0.01-s0"))) == 2
