"""`adapterfleet run` with two workers (issue #23): each trial, the fusion and each baseline job
is a Ray Train run of two gloo processes on the local Ray; the adapters are registered, the
fusion starts and registers, the baselines log their results, as with one worker.

Each of those runs holds both CPUs of this machine, so they run one after another (~40-50 s
each here). The baseline is MT-A. The fusion over MT-A and Head go through the same code on
workers (a `BaselineTraining` in `fit_on_workers`, as MT-A here); test_pipeline_baselines.py
trains them on one worker."""

from __future__ import annotations

import pytest
from tuning_support import config_document, run_pipeline_cli, runs_of, write_config

from adapterfleet.config import load_config

pytestmark = pytest.mark.integration


def test_run_with_two_workers_registers_the_adapters_fuses_and_trains_baselines(
    tmp_path, tiny_model
):
    document = config_document(tmp_path, tiny_model, reduction_factors=[4])
    document["resources"] = {"cpu": 1, "workers": 2}
    document["fusion"] = {"targets": {"fruit": "all"}, "training": {"max_epochs": 2}}
    document["baselines"] = {
        "systems": ["mt-a"],
        "tasks": ["fruit"],
        "reduction_factor": 8,
        "training": {"max_epochs": 1, "batch_size": 16, "learning_rate": 0.01},
    }
    path = write_config(tmp_path, document)
    result = run_pipeline_cli(path, tmp_path)
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
    # Ray Train's own run of each trial and of the fusion, under the pipeline's storage
    train_runs = config.storage / "ray" / "train"
    assert len(list(train_runs.glob("*/*-rf4-lr0.01-s0"))) == 2
    assert len(list(train_runs.glob("fusion/fusion-fruit-*"))) == 1
    fusion_epochs = [line for line in output.splitlines() if line.startswith("fusion fruit (")]
    assert [line.split(")")[1].split(":")[0] for line in fusion_epochs] == [
        " epoch 1/2",
        " epoch 2/2",
    ], fusion_epochs  # rank 0's lines, each once (Ray Train's print patch echoes print)
    assert len(list((config.storage / "fusion").glob("fruit/*/run/fusion_weights.png"))) == 1
    assert len(list(train_runs.glob("baselines/*"))) == 1  # mt-a
    baselines = runs_of(config.tracking_uri, "baseline")
    systems = sorted(r.data.tags["adapterfleet.system"] for r in baselines)
    assert systems == ["mt-a", "mt-a"], systems  # MT-A: one run per task
    assert all("best_dev_accuracy" in r.data.metrics for r in baselines)
    assert {r.info.status for r in baselines} == {"FINISHED"}
