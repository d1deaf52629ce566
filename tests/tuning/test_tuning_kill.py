"""A driver killed mid-sweep (SIGKILL, its local Ray dies with it) is told apart from a live one
by `status` (its heartbeat stops), and resumed by a new driver it leaves exactly what an
uninterrupted sweep leaves: one FINISHED run per trial, one parent per task, one registered
version per task, and no epoch trained twice."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from tuning_support import (
    config_document,
    end_all,
    expected_best,
    metric_steps,
    runs_of,
    version_numbers,
    write_config,
)

from adapterfleet.registry import default_tracking_uri, get_version
from adapterfleet.registry.heartbeat import HEARTBEAT_ENV

pytestmark = pytest.mark.integration
DRIVER = Path(__file__).with_name("sweep_driver.py")
EPOCHS = 3
START_DEADLINE_S = 240
RESUME_DEADLINE_S = 300


def _first_checkpoint(storage: Path) -> Path | None:
    hits = sorted(storage.glob("sweeps/*/*/checkpoints/epoch-0001/trainer_state.json"))
    return hits[0] if hits else None


def test_a_killed_driver_resumes_without_redoing_work(tiny_model: Path, tmp_path: Path) -> None:
    document = config_document(tmp_path, tiny_model)
    document["adapters"]["training"]["max_epochs"] = EPOCHS
    config_path = write_config(tmp_path, document)
    storage = tmp_path / "runs"
    marker = f"ADAPTERFLEET_KILL_TEST={uuid.uuid4().hex}"
    env = {**os.environ, marker.split("=")[0]: marker.split("=")[1], "PYTHONUNBUFFERED": "1"}
    env[HEARTBEAT_ENV] = "1"  # `status` takes the driver for gone 3 s after its last beat
    command = [sys.executable, "-u", str(DRIVER), str(config_path)]

    with open(tmp_path / "driver1.log", "w") as log:
        driver = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + START_DEADLINE_S
        try:
            while _first_checkpoint(storage) is None:
                assert driver.poll() is None, (tmp_path / "driver1.log").read_text()[-3000:]
                assert time.monotonic() < deadline, "no trial finished an epoch in time"
                time.sleep(0.02)
        finally:
            driver.send_signal(signal.SIGKILL)
            driver.wait()
            killed = time.monotonic()
            end_all(marker, grace_s=0)
    finished_before = sorted(p.parent.name for p in storage.glob("sweeps/*/*/run/run.json"))
    time.sleep(max(0.0, killed + 4 - time.monotonic()))
    status = _status_of(config_path, env)  # the killed driver's trials are not running
    assert re.search(
        r"^no heartbeat from the driver since .+ UTC \(killed, or its node was lost\): [1-4] "
        r"trials? stopped mid-way \(counted as pending\)",
        status,
        re.M,
    ), status

    with open(tmp_path / "driver2.log", "w") as log:
        resumed = subprocess.run(
            [*command, "--resume"],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            timeout=RESUME_DEADLINE_S,
        )
    end_all(marker, grace_s=10)
    output = (tmp_path / "driver2.log").read_text()
    assert resumed.returncode == 0, output[-3000:]
    assert "resuming" in output

    uri = default_tracking_uri(storage)
    trial_runs = runs_of(uri, "trial")
    assert len(trial_runs) == 4, [r.info.run_name for r in trial_runs]
    assert all(r.info.status == "FINISHED" for r in trial_runs)
    for run in trial_runs:  # one value per epoch: nothing trained twice, nothing lost
        steps = metric_steps(uri, run.info.run_id, "dev_accuracy")
        assert steps == list(range(1, EPOCHS + 1)), (run.info.run_name, steps, finished_before)
        assert len(metric_steps(uri, run.info.run_id, "best_dev_accuracy")) == 1
    parents = runs_of(uri, "sweep")
    assert sorted(r.data.tags["adapterfleet.task"] for r in parents) == ["fruit", "water"]
    assert all(r.info.status == "FINISHED" for r in parents)
    for task in ("fruit", "water"):
        name = f"tinysweep.adapter.{task}"
        assert version_numbers(uri, name) == [1]
        best = get_version(uri, name, alias="best")
        assert best is not None
        assert best.tags["adapterfleet.trial_id"] == expected_best(trial_runs, task)
        assert f"REGISTERED {task} {name} v1 {best.sha256}" in output
    assert "no heartbeat" not in _status_of(config_path, env)


@dataclass
class Interrupted:
    command: list[str]
    config_path: Path
    env: dict[str, str]
    marker: str
    returncode: int
    output: str


def _interrupt_mid_sweep(
    tiny_model: Path,
    tmp_path: Path,
    sig: signal.Signals,
    ready: Callable[[Path], bool] = lambda root: _first_checkpoint(root / "runs") is not None,
) -> Interrupted:
    """`adapterfleet run` of two tasks, sent `sig` once `ready` (by default: once a trial has
    finished an epoch): SIGINT to its process group (Ctrl-C in a terminal), SIGTERM to the
    driver alone (`kill PID`)."""
    document = config_document(tmp_path, tiny_model)
    document["adapters"]["training"]["max_epochs"] = EPOCHS
    config_path = write_config(tmp_path, document)
    marker = f"ADAPTERFLEET_KILL_TEST={uuid.uuid4().hex}"
    env = {
        **os.environ,
        marker.split("=")[0]: marker.split("=")[1],
        "PYTHONPATH": ":".join(sys.path),
    }
    command = [str(Path(sys.executable).with_name("adapterfleet")), "run", str(config_path)]
    command += ["--num-cpus", "2"]

    def default_sigint() -> None:  # as in a terminal (a background job ignores SIGINT)
        signal.signal(signal.SIGINT, signal.SIG_DFL)

    with open(tmp_path / "driver1.log", "w") as log:
        driver = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True,
            preexec_fn=default_sigint,
        )  # fmt: skip
        deadline = time.monotonic() + START_DEADLINE_S
        try:
            while not ready(tmp_path):
                assert driver.poll() is None, (tmp_path / "driver1.log").read_text()[-3000:]
                assert time.monotonic() < deadline, "the moment to interrupt never came"
                time.sleep(0.05)
            if sig == signal.SIGINT:
                os.killpg(driver.pid, sig)
            else:
                os.kill(driver.pid, sig)
            driver.wait(timeout=120)
        finally:
            if driver.poll() is None:
                os.killpg(driver.pid, signal.SIGKILL)
            end_all(marker, grace_s=30)
    output = (tmp_path / "driver1.log").read_text()
    return Interrupted(command, config_path, env, marker, driver.returncode, output)


def test_ctrl_c_mid_sweep_is_one_line_and_the_same_command_continues(
    tiny_model: Path, tmp_path: Path
) -> None:
    """Ctrl-C (SIGINT to the terminal's foreground group) during `adapterfleet run` went to
    Tune's handler, which ended fit() early, and the driver died in a 70-line traceback over
    results of trials that never started. Now: `interrupted: ...`, exit 130, and the same
    command again finishes the sweep without a second run of any trial."""
    stop = _interrupt_mid_sweep(tiny_model, tmp_path, signal.SIGINT)
    output = stop.output
    assert stop.returncode == 130, output[-3000:]
    assert "Traceback" not in output, output[-3000:]
    said = [line for line in output.splitlines() if line.startswith("interrupted")]
    assert said == [
        "interrupted: finished epochs, trials and registered versions are kept; run the same "
        "command again to continue"
    ], output[-3000:]
    assert output.rstrip().splitlines()[-1] == said[0], output[-3000:]  # no worker line after
    status = _status(stop)  # the stopped trials are not running
    assert re.search(r"^interrupted .+ UTC: [1-4] trials? stopped mid-way", status, re.M), status
    rows = [line.split() for line in status.splitlines()]
    assert [r[3] for r in rows if r[:1] in (["fruit"], ["water"])] == ["0", "0"], status  # RUN
    assert [r[4] for r in rows if r[:1] in (["fruit"], ["water"])] == ["0", "0"], status  # FAIL
    uri = default_tracking_uri(tmp_path / "runs")
    stopped = {r.info.run_id: r.info.status for r in runs_of(uri, "trial")}
    assert "KILLED" in stopped.values() and "RUNNING" not in stopped.values(), stopped

    again = subprocess.run(
        stop.command, capture_output=True, text=True, env=stop.env, timeout=RESUME_DEADLINE_S
    )
    end_all(stop.marker, grace_s=10)
    assert again.returncode == 0, (again.stdout + again.stderr)[-3000:]
    trial_runs = runs_of(uri, "trial")
    assert len(trial_runs) == 4 and all(r.info.status == "FINISHED" for r in trial_runs)
    assert set(stopped) <= {r.info.run_id for r in trial_runs}  # reopened, not made anew
    for run in trial_runs:  # each epoch once: the interrupted trials went on from a checkpoint
        steps = metric_steps(uri, run.info.run_id, "dev_accuracy")
        assert steps == list(range(1, EPOCHS + 1)), (run.info.run_name, steps)
    for task in ("fruit", "water"):
        assert version_numbers(uri, f"tinysweep.adapter.{task}") == [1]
    assert "interrupted" not in _status(stop)  # the run took it off


def test_a_task_registered_before_ctrl_c_keeps_its_sweep_run_finished(
    tiny_model: Path, tmp_path: Path
) -> None:
    """Ctrl-C once one task is registered and the other's trials run: the registered task's
    parent run was set KILLED with the rest, and stayed so, since the next run skips the task.
    Now it stays FINISHED; the other's is KILLED until the next run finishes it."""

    def one_registered(root: Path) -> bool:
        log = (root / "driver1.log").read_text()
        return len(re.findall(r"^task \w+: registered ", log, re.M)) == 1

    stop = _interrupt_mid_sweep(tiny_model, tmp_path, signal.SIGINT, one_registered)
    assert stop.returncode == 130, stop.output[-3000:]
    (first,) = re.findall(r"^task (\w+): registered ", stop.output, re.M)
    uri = default_tracking_uri(tmp_path / "runs")
    parents = {run.data.tags["adapterfleet.task"]: run.info.status for run in runs_of(uri, "sweep")}
    other = ({"fruit", "water"} - {first}).pop()
    assert parents == {first: "FINISHED", other: "KILLED"}, stop.output[-3000:]

    again = subprocess.run(
        stop.command, capture_output=True, text=True, env=stop.env, timeout=RESUME_DEADLINE_S
    )
    end_all(stop.marker, grace_s=10)
    assert again.returncode == 0, (again.stdout + again.stderr)[-3000:]
    assert f"task {first}: already registered as" in again.stdout, again.stdout[-3000:]
    parents = {run.data.tags["adapterfleet.task"]: run.info.status for run in runs_of(uri, "sweep")}
    assert parents == {first: "FINISHED", other: "FINISHED"}


def test_sigterm_mid_sweep_stops_as_ctrl_c_does(tiny_model: Path, tmp_path: Path) -> None:
    """SIGTERM (`kill`, `ray job stop`, a preempted node) to the driver printed the stack dump
    of Ray's core worker (`*** SIGTERM received at time=...`) and ended with no word of what was
    kept. Now it stops as Ctrl-C does: one line, exit 143, the experiment marked interrupted."""
    stop = _interrupt_mid_sweep(tiny_model, tmp_path, signal.SIGTERM)
    output = stop.output
    assert stop.returncode == 143, output[-3000:]
    assert "SIGTERM received" not in output and "Traceback" not in output, output[-3000:]
    assert output.rstrip().splitlines()[-1] == (
        "interrupted by SIGTERM: finished epochs, trials and registered versions are kept; run "
        "the same command again to continue"
    ), output[-3000:]
    assert re.search(r"^interrupted .+ UTC", _status(stop), re.M)


def _status(stop: Interrupted) -> str:
    return _status_of(stop.config_path, stop.env)


def _status_of(config_path: Path, env: dict[str, str]) -> str:
    """`adapterfleet status -c CONFIG`'s output, as a user runs it."""
    command = [
        str(Path(sys.executable).with_name("adapterfleet")),
        "status",
        "-c",
        str(config_path),
    ]
    shown = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)
    assert shown.returncode == 0, shown.stdout + shown.stderr
    return shown.stdout
