"""`adapterfleet stop` of a submitted pipeline mid-sweep, on a real token-mode Ray head: the
driver gets the time to end its open runs KILLED, as on Ctrl-C, before Ray's SIGKILL."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any  # conftest's RayHead

import pytest
import yaml
from tuning_support import config_document, make_tiny_model, mlflow_client, runs_of

from adapterfleet.orchestration.jobs import job_logs, stop_job, submit_pipeline, wait_for_job

pytestmark = pytest.mark.integration
TRAINING_DEADLINE_S = 240.0


@pytest.fixture
def with_token(ray_head: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("RAY_AUTH_TOKEN", ray_head.token)
    monkeypatch.delenv("RAY_AUTH_TOKEN_PATH", raising=False)
    monkeypatch.delenv("RAY_JOB_STOP_WAIT_TIME_S", raising=False)
    return ray_head


def test_a_stopped_job_ends_its_runs_killed_not_running(with_token: Any, tmp_path: Path) -> None:
    """Ray gives a stopped job's processes RAY_JOB_STOP_WAIT_TIME_S between SIGTERM and SIGKILL,
    3 s by default; the driver's cleanup (leave Ray, end its open runs KILLED) took 1.5 s here,
    2.4 s beside four busy processes, and more against a remote tracking server. A submitted job
    now gets 30 s unless the shell sets its own; the driver exits as soon as it is done."""
    document = config_document(tmp_path, make_tiny_model(tmp_path / "model"))
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    document.update(tracking_uri=uri, resources={"cpu": 1})
    document["adapters"].update(reduction_factors=[4])
    document["adapters"]["training"].update(max_epochs=200, patience=200)  # training when stopped
    config = tmp_path / "project" / "configs" / "pipeline.yaml"
    config.parent.mkdir(parents=True)
    config.write_text(yaml.safe_dump(document))

    job_id = submit_pipeline(config, with_token.address, working_dir=config.parent.parent)
    _wait_for_an_epoch(uri, job_id, with_token.address)
    assert stop_job(with_token.address, job_id) is True
    assert wait_for_job(with_token.address, job_id, timeout_s=120, poll_s=0.5) == "STOPPED"

    logs = str(job_logs(with_token.address, job_id))
    assert "interrupted by SIGTERM: finished epochs" in logs, logs[-3000:]
    trials = {run.info.run_name: run.info.status for run in runs_of(uri, "trial")}
    sweeps = {run.info.run_name: run.info.status for run in runs_of(uri, "sweep")}
    assert "RUNNING" not in {*trials.values(), *sweeps.values()}, (trials, sweeps, logs[-3000:])
    assert "KILLED" in trials.values(), trials


def _wait_for_an_epoch(uri: str, job_id: str, address: str) -> None:
    """Until a trial run has logged its first epoch's dev accuracy: the sweep is under way. The
    store is read only once the job says its sweep started: the driver creates the SQLite store,
    and two processes creating its tables at once fail."""
    deadline = time.monotonic() + TRAINING_DEADLINE_S
    while time.monotonic() < deadline:
        if " starting, " in str(job_logs(address, job_id)):
            for run in runs_of(uri, "trial"):
                if mlflow_client(uri).get_metric_history(run.info.run_id, "dev_accuracy"):
                    return
        time.sleep(1.0)
    logs = str(job_logs(address, job_id))
    raise AssertionError(f"no trial logged an epoch in {TRAINING_DEADLINE_S} s: {logs[-3000:]}")
