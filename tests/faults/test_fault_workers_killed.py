"""Issue #23: one worker of a two-worker trial (a Ray Train run inside the Tune trial) SIGKILLed
mid-epoch. Ray Train restarts the worker group, every rank continues after the newest finished
epoch, and MLflow and the registry end as if nothing happened: one run for the trial, every epoch
logged once, one registered version."""

from __future__ import annotations

from pathlib import Path

import pytest
from fault_support import ActorKiller, sweep_document, tune_reported_epochs
from tuning_support import metric_steps, runs_of, version_numbers

from adapterfleet.config import parse_config
from adapterfleet.orchestration.sweep import run_adapter_stage

pytestmark = pytest.mark.integration
EPOCHS = 5


def test_a_killed_worker_of_a_two_worker_trial_resumes_after_its_last_epoch(
    ray_local: None, tiny_model: Path, tmp_path: Path
) -> None:
    document = sweep_document(tmp_path, tiny_model, epochs=EPOCHS, train_examples=3000)
    document["resources"] = {"cpu": 1, "workers": 2}
    config = parse_config(document, tmp_path)
    storage = tmp_path / "runs"
    killer = ActorKiller(storage, "RayTrainWorker", count=2)
    killer.start()
    lines: list[str] = []
    registered = run_adapter_stage(config, max_failures=2, progress=lines.append)
    killer.join(timeout=10)
    print("\n".join(lines))
    print(f"killed pid {killer.killed_pid} after epoch {killer.epoch_at_kill}")

    if killer.error is not None:
        raise killer.error
    assert killer.killed_pid is not None, f"the killer was still {killer.stage}"
    assert killer.epoch_at_kill is not None and killer.epoch_at_kill < EPOCHS, "killed too late"
    assert sorted(registered) == ["fruit"]

    uri = config.tracking_uri
    trial_runs = runs_of(uri, "trial")
    assert [r.data.tags["adapterfleet.trial_id"] for r in trial_runs] == ["fruit-rf4-lr0.01-s0"]
    run = trial_runs[0]
    assert run.info.status == "FINISHED"
    for key in ("train_loss", "dev_accuracy", "learning_rate"):  # each epoch trained once
        assert metric_steps(uri, run.info.run_id, key) == list(range(1, EPOCHS + 1)), key
    reported = tune_reported_epochs(storage)  # the restarted workers went on after the epoch
    assert reported == sorted(set(reported)) and reported[-1] == EPOCHS, reported
    assert version_numbers(uri, "tinysweep.adapter.fruit") == [1]
    assert registered["fruit"].run_id == run.info.run_id
