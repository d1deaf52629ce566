"""The disk holding `storage` fills mid-sweep (a real tmpfs, filled to the last byte): the run
stops within seconds with one line naming the folder and the fix, exit 2, and once space is
freed the same command goes on. It printed SQLAlchemy's `database or disk is full` traceback
every minute and Tune's syncer warnings every ten seconds (2,330 lines), retried the trials,
and took ~100 s to obey SIGTERM (each MLflow write was retried for two minutes)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from disk_support import fill, small_disk
from fault_support import checkpoint_epochs, sweep_document
from tuning_support import end_all, metric_steps, runs_of, version_numbers, write_config

from adapterfleet.disk import MIN_FREE_ENV
from adapterfleet.registry import default_tracking_uri

pytestmark = pytest.mark.integration
EPOCHS = 4
DISK_MB = 16  # room for the store, the token cache and the tiny trials' checkpoints
START_DEADLINE_S = 240
STOP_DEADLINE_S = 60


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[Path]:
    with small_disk(tmp_path / "disk", DISK_MB) as folder:
        yield folder


def test_a_full_disk_stops_the_run_in_one_line_and_it_resumes(
    tiny_model: Path, tmp_path: Path, disk: Path
) -> None:
    document = sweep_document(
        tmp_path, tiny_model, tasks=("fruit", "water"), epochs=EPOCHS, train_examples=200
    )
    document["resources"] = {"cpu": 2}  # one trial after the other: fruit registers first
    storage = disk / "runs"
    document["storage"] = str(storage)
    config_path = write_config(tmp_path, document)
    marker = f"ADAPTERFLEET_DISK_TEST={uuid.uuid4().hex}"
    env = {**os.environ, marker.split("=")[0]: marker.split("=")[1]}
    env.update({"PYTHONPATH": ":".join(sys.path), MIN_FREE_ENV: "0"})  # the tmpfs is tiny
    command = [str(Path(sys.executable).with_name("adapterfleet")), "run", str(config_path)]
    command += ["--num-cpus", "2"]

    def second_trial_trains() -> bool:
        return sum(epoch >= 1 for epoch in checkpoint_epochs(storage).values()) >= 2

    log_path = tmp_path / "driver1.log"
    with open(log_path, "w") as log:
        driver = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
        try:
            deadline = time.monotonic() + START_DEADLINE_S
            while not second_trial_trains():
                assert driver.poll() is None, log_path.read_text()[-3000:]
                assert time.monotonic() < deadline, "the second trial never trained an epoch"
                time.sleep(0.05)
            filler = fill(disk)
            full_at = time.monotonic()
            driver.wait(timeout=STOP_DEADLINE_S)
            took = time.monotonic() - full_at
        finally:
            if driver.poll() is None:
                os.killpg(driver.pid, signal.SIGKILL)
            end_all(marker, grace_s=30)
    output = log_path.read_text()
    assert driver.returncode == 2, output[-3000:]
    assert took < 30, (took, output[-3000:])
    last = output.rstrip().splitlines()[-1]
    assert last.startswith(f"error: the disk holding {storage} is full ("), output[-3000:]
    assert last.endswith(
        "free space there, then run the same command again to continue (finished epochs, trials "
        "and registered versions are kept); or start afresh on another disk (-o storage=DIR)"
    ), last
    for noise in ("Traceback", "SQLAlchemy", "syncer", "retrying", "could not mark"):
        assert noise not in output, (noise, output[-3000:])
    assert sum(" is full (" in line for line in output.splitlines()) == 1, output[-3000:]
    uri = default_tracking_uri(storage)
    assert version_numbers(uri, "tinysweep.adapter.fruit") == [1]  # registered before: kept

    filler.unlink()  # space freed: the same command goes on from the checkpoints
    again = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    end_all(marker, grace_s=10)
    assert again.returncode == 0, (again.stdout + again.stderr)[-3000:]
    assert "task fruit: already registered as tinysweep.adapter.fruit v1" in again.stdout
    for task in ("fruit", "water"):
        assert version_numbers(uri, f"tinysweep.adapter.{task}") == [1]
    trial_runs = runs_of(uri, "trial")
    assert len(trial_runs) == 2 and all(r.info.status == "FINISHED" for r in trial_runs)
    for run in trial_runs:  # each epoch logged once: the stopped trial went on, not anew
        steps = metric_steps(uri, run.info.run_id, "dev_accuracy")
        assert steps == list(range(1, EPOCHS + 1)), (run.info.run_name, steps)
