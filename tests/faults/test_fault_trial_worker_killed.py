"""Issue #6: a trial's Ray worker SIGKILLed mid-epoch. Tune retries the trial (FailureConfig
max_failures), the trial resumes after its newest finished epoch, and MLflow and the registry end
as if nothing happened: one run for the trial, every epoch logged once, one registered version."""

from __future__ import annotations

from pathlib import Path

import pytest
from fault_support import ActorKiller, sweep_document, tune_reported_epochs
from tuning_support import metric_steps, runs_of, version_numbers

from adapterfleet.config import parse_config
from adapterfleet.orchestration.sweep import run_adapter_stage

pytestmark = pytest.mark.integration
EPOCHS = 6


def test_a_killed_trial_worker_resumes_after_its_last_finished_epoch(
    ray_local: None, tiny_model: Path, tmp_path: Path
) -> None:
    # 3,000 examples: seconds per epoch even with a warm Ray, so the kill lands mid-trial
    document = sweep_document(tmp_path, tiny_model, epochs=EPOCHS, train_examples=3000)
    config = parse_config(document, tmp_path)
    storage = tmp_path / "runs"
    killer = ActorKiller(storage, "ImplicitFunc")
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
    retried = f"failed (its Ray worker pid {killer.killed_pid} on "
    retry_lines = [line for line in lines if "retrying from its last checkpoint" in line]
    assert retry_lines and all(retried in line for line in retry_lines), lines
    assert sorted(registered) == ["fruit"]

    uri = config.tracking_uri
    trial_runs = runs_of(uri, "trial")
    assert [r.data.tags["adapterfleet.trial_id"] for r in trial_runs] == ["fruit-rf4-lr0.01-s0"]
    run = trial_runs[0]
    assert run.info.status == "FINISHED"
    for key in ("train_loss", "dev_accuracy", "learning_rate"):  # each epoch trained once
        assert metric_steps(uri, run.info.run_id, key) == list(range(1, EPOCHS + 1)), key
    assert len(metric_steps(uri, run.info.run_id, "best_dev_accuracy")) == 1
    reported = tune_reported_epochs(storage)  # the retry went on after the checkpoint
    assert len(reported) == len(set(reported)) and reported == sorted(reported), reported
    assert reported[-1] == EPOCHS

    assert version_numbers(uri, "tinysweep.adapter.fruit") == [1]
    assert registered["fruit"].tags["adapterfleet.trial_id"] == "fruit-rf4-lr0.01-s0"
    assert registered["fruit"].run_id == run.info.run_id
