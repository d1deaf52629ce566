"""Ctrl-C's (or SIGTERM's) mark on a pipeline's experiment, and the runs the driver ends with it,
on a real SQLite store: every run its jobs left RUNNING ends KILLED in one quick step (the MLflow
UI showed them RUNNING, with a spinner, until the next run), a run of another driver is left
alone, and the next run reopens them."""

from __future__ import annotations

import time

from mlflow import MlflowClient

from adapterfleet.registry import (
    ensure_experiment,
    open_baseline_run,
    open_fusion_run,
    open_sweep_run,
    open_trial_run,
)
from adapterfleet.registry.environment import driven_by, run_driver
from adapterfleet.registry.interrupted import MARK_TIMEOUT_S, interrupted_at, mark_interrupted
from adapterfleet.registry.tags import TAG_DRIVER

OPEN_TRIALS = 8


def test_ctrl_c_ends_the_runs_its_driver_left_open_killed_and_a_resume_reopens_them(
    sqlite_uri: str,
) -> None:
    name = f"interrupted-{time.time_ns()}"
    experiment = ensure_experiment(sqlite_uri, name)
    sweep = open_sweep_run(sqlite_uri, experiment, "sweep-1", "rte")
    trials = [
        open_trial_run(sqlite_uri, experiment, sweep.run_id, f"rte-rf{i}", f"rte-rf{i}-abc123")
        for i in range(OPEN_TRIALS + 1)
    ]
    trials[-1].end("FINISHED")  # done before the interruption: stays so
    with driven_by(run_driver()):  # as the fusion and baseline jobs of this driver, on Ray
        fusion = open_fusion_run(sqlite_uri, experiment, "rte", "fusion-rte-abc")
        baseline = open_baseline_run(sqlite_uri, experiment, "head-rte-s0-abc", "head", "rte", 0)
    with driven_by("otherhost 4242"):  # `fuse --wait` beside the sweep, still training
        other = open_fusion_run(sqlite_uri, experiment, "mrpc", "fusion-mrpc-abc")
    sweep.end("KILLED")  # as `run_adapter_stage` ends it when Ctrl-C reaches the driver

    started = time.monotonic()
    assert mark_interrupted(sqlite_uri, name)
    took = time.monotonic() - started

    client = MlflowClient(sqlite_uri)
    status = {run.info.run_id: run.info.status for run in client.search_runs([experiment])}
    open_before = [t.run_id for t in trials[:-1]] + [fusion.run_id, baseline.run_id]
    assert [status[run] for run in open_before] == ["KILLED"] * (OPEN_TRIALS + 2)
    assert status[trials[-1].run_id] == "FINISHED"
    assert status[other.run_id] == "RUNNING"
    assert client.get_run(other.run_id).data.tags[TAG_DRIVER] == "otherhost 4242"
    assert interrupted_at(client.get_experiment(experiment).tags) is not None
    assert took < MARK_TIMEOUT_S / 2, f"{OPEN_TRIALS + 2} runs ended in {took:.2f} s"

    # the next run reopens the sweep and its trials: the same runs, RUNNING, then FINISHED
    again = open_sweep_run(sqlite_uri, experiment, "sweep-1", "rte")
    trial = open_trial_run(sqlite_uri, experiment, again.run_id, "rte-rf0", "rte-rf0-abc123")
    assert (again.run_id, trial.run_id) == (sweep.run_id, trials[0].run_id)
    assert client.get_run(trial.run_id).info.status == "RUNNING"
    trial.end("FINISHED")
    assert client.get_run(trial.run_id).info.status == "FINISHED"


def test_a_job_its_driver_runs_on_ray_opens_runs_that_belong_to_that_driver(
    sqlite_uri: str, capsys
) -> None:
    """A fusion or baseline job runs in a Ray worker (`run_relayed`): its runs are tagged with
    the driver that sent it, not the worker, so that driver finds them when it is stopped."""
    from adapterfleet.orchestration.relay import WorkerSay, run_relayed

    assert WorkerSay("fusion rte").driver == run_driver()  # made in the driver, sent along
    experiment = ensure_experiment(sqlite_uri, f"relayed-{time.time_ns()}")

    def job(*, say: WorkerSay) -> str:
        return open_baseline_run(sqlite_uri, experiment, "head-rte-s0-x", "head", "rte", 0).run_id

    run_id = run_relayed(job, WorkerSay("baseline head rte seed 0", driver="head-1 4242"))
    assert MlflowClient(sqlite_uri).get_run(run_id).data.tags[TAG_DRIVER] == "head-1 4242"
    assert run_driver() != "head-1 4242"  # the worker is itself again after the job


def test_runs_a_killed_driver_left_running_are_ended_killed_and_a_live_drivers_are_not(
    sqlite_uri: str,
) -> None:
    """kill -9 (or the out-of-memory killer) leaves a driver's runs RUNNING. A run with the same
    settings reopens them; one with other settings never did, so the MLflow UI showed them
    running for good. The next driver ends KILLED those of a driver of this host that no
    longer runs; a live one's (`fuse --wait` beside it) and another host's are left alone."""
    import socket
    import subprocess
    import sys

    from adapterfleet.orchestration.sweep import _end_orphans

    host = socket.gethostname()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()  # gone, and reaped
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    experiment = ensure_experiment(sqlite_uri, f"orphans-{time.time_ns()}")
    runs = {}
    try:
        for who, driver in (
            ("dead", f"{host} {dead.pid}"),
            ("live", f"{host} {live.pid}"),
            ("elsewhere", "otherhost 4242"),
            ("ours", run_driver()),
        ):
            with driven_by(driver):
                sweep = open_sweep_run(sqlite_uri, experiment, f"sweep-{who}", "rte")
                trial = open_trial_run(sqlite_uri, experiment, sweep.run_id, who, f"{who}-abc")
            runs[who] = (sweep.run_id, trial.run_id)
        said: list[str] = []
        _end_orphans(sqlite_uri, experiment, said.append)  # as `run` and `sweep` begin
    finally:
        live.kill()
        live.wait()
    client = MlflowClient(sqlite_uri)
    status = {who: {client.get_run(r).info.status for r in ids} for who, ids in runs.items()}
    assert status == {
        "dead": {"KILLED"},
        "live": {"RUNNING"},
        "elsewhere": {"RUNNING"},
        "ours": {"RUNNING"},
    }
    assert said == [
        f"ended KILLED 2 runs that process {dead.pid} on {host}, a driver no longer running, "
        "left RUNNING (a run with their settings goes on from their checkpoints)"
    ]
