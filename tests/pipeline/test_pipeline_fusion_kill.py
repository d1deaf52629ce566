"""The driver of `adapterfleet run` killed (SIGKILL) while the fusion trains: `run --resume`
finishes it with the counts of an undisturbed run (4 trial runs, 1 fusion run, one registry version
each) and the fusion continues after its newest finished epoch, each epoch logged once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from tuning_support import config_document, end_all, metric_steps, runs_of, version_numbers
from tuning_support import write_config as write_pipeline

from adapterfleet.registry import default_tracking_uri
from adapterfleet.training.workdir import checkpoint_epoch

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
FUSION_EPOCHS = 4
START_DEADLINE_S = 420
RESUME_DEADLINE_S = 420


def fusion_checkpoints(storage: Path) -> list[int]:
    folders = storage.glob("fusion/fruit/*/checkpoints/epoch-*")
    return sorted(e for e in (checkpoint_epoch(f) for f in folders) if e is not None)


def test_a_driver_killed_during_the_fusion_resumes_it(tiny_model: Path, tmp_path: Path) -> None:
    document = config_document(tmp_path, tiny_model)
    fusion_training = {"max_epochs": FUSION_EPOCHS, "patience": FUSION_EPOCHS}
    fusion_training.update(batch_size=16, learning_rate=0.01, device="cpu")
    document["fusion"] = {"targets": {"fruit": "all"}, "training": fusion_training}
    config = write_pipeline(tmp_path, document)
    storage = tmp_path / "runs"
    key, value = "ADAPTERFLEET_FUSION_KILL_TEST", uuid.uuid4().hex
    marker = f"{key}={value}"
    env = {**os.environ, key: value, "HF_HUB_OFFLINE": "1", "MLFLOW_DISABLE_TELEMETRY": "true"}
    env.pop("RAY_ADDRESS", None)
    command = [sys.executable, "-m", "adapterfleet.cli.app", "run", str(config), "--num-cpus", "2"]

    with open(tmp_path / "run1.log", "w") as log:
        driver = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=ROOT)
        deadline = time.monotonic() + START_DEADLINE_S
        try:
            while not fusion_checkpoints(storage):
                assert driver.poll() is None, (tmp_path / "run1.log").read_text()[-3000:]
                assert time.monotonic() < deadline, "the fusion finished no epoch in time"
                time.sleep(0.05)
        finally:
            driver.send_signal(signal.SIGKILL)
            driver.wait()
            end_all(marker, grace_s=0)
    killed_after = fusion_checkpoints(storage)[-1]
    assert killed_after < FUSION_EPOCHS, "the fusion ended before the kill: nothing tested"

    with open(tmp_path / "run2.log", "w") as log:
        resumed = subprocess.run(
            [*command, "--resume"],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=ROOT,
            timeout=RESUME_DEADLINE_S,
        )
    end_all(marker, grace_s=10)
    output = (tmp_path / "run2.log").read_text()
    assert resumed.returncode == 0, output[-3000:]
    assert f"resuming after epoch {killed_after}" in output, output[-3000:]

    uri = default_tracking_uri(storage)
    trials = runs_of(uri, "trial")
    assert len(trials) == 4 and {r.info.status for r in trials} == {"FINISHED"}
    fusions = runs_of(uri, "fusion")
    assert len(fusions) == 1 and fusions[0].info.status == "FINISHED"
    steps = metric_steps(uri, fusions[0].info.run_id, "dev_accuracy")
    assert steps == list(range(1, FUSION_EPOCHS + 1))  # every epoch once: none retrained
    for task in ("fruit", "water"):
        assert version_numbers(uri, f"tinysweep.adapter.{task}") == [1]
    assert version_numbers(uri, "tinysweep.fusion.fruit") == [1]
    assert fusion_checkpoints(storage) == []  # cleared once the fusion was registered
