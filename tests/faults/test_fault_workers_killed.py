"""Issue #23: one worker of a two-worker trial (a Ray Train run inside the Tune trial) SIGKILLed
mid-epoch. Ray Train restarts the worker group, every rank continues after the newest finished
epoch, and MLflow and the registry end as if nothing happened: one run for the trial, every epoch
logged once, one registered version."""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path

import pytest
from fault_support import checkpoint_epochs, sweep_document, wait_for
from test_fault_trial_worker_killed import tune_reported_epochs
from tuning_support import metric_steps, runs_of, version_numbers

from adapterfleet.config import parse_config
from adapterfleet.orchestration.sweep import run_adapter_stage

pytestmark = pytest.mark.integration
EPOCHS = 5
DEADLINE_S = 300.0


def train_worker_pids() -> list[int]:
    """PIDs of the alive Ray Train workers (actors of class `RayTrainWorker`), from the GCS."""
    from ray._private.state import actors

    table = actors(actor_state_name="ALIVE").values()
    return [int(a["Pid"]) for a in table if a["ActorClassName"] == "RayTrainWorker" and a["Pid"]]


class WorkerKiller(threading.Thread):
    """Once the first epoch checkpoint exists, SIGKILLs one of the trial's two workers."""

    def __init__(self, storage: Path) -> None:
        super().__init__(daemon=True)
        self.storage = storage
        self.killed_pid: int | None = None
        self.epoch_at_kill: int | None = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            first = lambda: checkpoint_epochs(self.storage)  # noqa: E731
            wait_for("a first epoch checkpoint", first, DEADLINE_S)
            pids = wait_for("two train workers", train_worker_pids, 60.0, 0.2)
            assert len(pids) == 2, f"expected two train workers, found {pids}"
            self.epoch_at_kill = max(checkpoint_epochs(self.storage).values())
            os.kill(pids[-1], signal.SIGKILL)
            self.killed_pid = pids[-1]
        except BaseException as error:  # noqa: BLE001 - re-raised by the test
            self.error = error


def test_a_killed_worker_of_a_two_worker_trial_resumes_after_its_last_epoch(
    ray_local: None, tiny_model: Path, tmp_path: Path
) -> None:
    document = sweep_document(tmp_path, tiny_model, epochs=EPOCHS, train_examples=3000)
    document["resources"] = {"cpu": 1, "workers": 2}
    config = parse_config(document, tmp_path)
    storage = tmp_path / "runs"
    killer = WorkerKiller(storage)
    killer.start()
    lines: list[str] = []
    registered = run_adapter_stage(config, max_failures=2, progress=lines.append)
    killer.join(timeout=10)
    print("\n".join(lines))
    print(f"killed pid {killer.killed_pid} after epoch {killer.epoch_at_kill}")

    if killer.error is not None:
        raise killer.error
    assert killer.killed_pid is not None
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
