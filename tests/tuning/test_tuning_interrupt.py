"""Ctrl-C in a process that stays in Ray, as a notebook's kernel does: the sweep's trials stop at
once and give their CPUs back, their runs end KILLED with the experiment marked interrupted, and
the next call in the same process resumes the sweep to its end. Before, the trials trained on
and held every CPU while the traceback lived (IPython keeps the last one), so the next call
waited for resources for good, and their runs stayed RUNNING."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest
import ray
from tuning_support import config_document, mlflow_client, runs_of

from adapterfleet.config import parse_config
from adapterfleet.orchestration.sweep import run_adapter_stage
from adapterfleet.registry.tags import TAG_INTERRUPTED

pytestmark = pytest.mark.integration
START_DEADLINE_S = 240
FREED_DEADLINE_S = 15


def _checkpoints(storage: Path) -> list[Path]:
    return sorted(storage.glob("sweeps/*/*/checkpoints/epoch-*"))


def _ctrl_c_after_first_epoch(storage: Path, armed: threading.Event) -> None:
    """SIGINT to this process, as Jupyter's "interrupt the kernel" sends it, once a trial has
    checkpointed an epoch (the sweep is then inside Tune's fit)."""
    deadline = time.monotonic() + START_DEADLINE_S
    while armed.is_set() and time.monotonic() < deadline:
        if _checkpoints(storage):
            if armed.is_set():
                os.kill(os.getpid(), signal.SIGINT)
            return
        time.sleep(0.05)


def _free_cpus() -> float:
    return float(ray.available_resources().get("CPU", 0.0))


def test_ctrl_c_in_a_notebook_frees_the_trials_and_the_next_call_finishes(
    ray_local: None, tiny_model: Path, tmp_path: Path
) -> None:
    document = config_document(tmp_path, tiny_model)
    document["adapters"]["training"]["max_epochs"] = 6  # still training when interrupted
    document["resources"] = {"cpu": 1}  # two trials side by side, one CPU each
    config = parse_config(document, tmp_path)
    storage = tmp_path / "runs"
    free_before = _free_cpus()
    armed = threading.Event()
    armed.set()
    interrupter = threading.Thread(
        target=_ctrl_c_after_first_epoch, args=(storage, armed), daemon=True
    )
    interrupter.start()
    lines: list[str] = []
    try:
        with pytest.raises(KeyboardInterrupt) as caught:
            run_adapter_stage(config, progress=lines.append)
    finally:
        armed.clear()
    kept = caught.value  # held on to, as IPython holds the last traceback

    deadline = time.monotonic() + FREED_DEADLINE_S
    while _free_cpus() < free_before and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _free_cpus() == free_before, (ray.available_resources(), "\n".join(lines))
    checkpoints = _checkpoints(storage)
    time.sleep(3)  # a trial's epoch here takes well under a second
    assert _checkpoints(storage) == checkpoints, "a trial trained on after Ctrl-C"

    trials = runs_of(config.tracking_uri, "trial")
    assert trials and {run.info.status for run in trials} == {"KILLED"}, [
        (run.info.run_name, run.info.status) for run in trials
    ]
    experiment = mlflow_client(config.tracking_uri).get_experiment_by_name(config.name)
    assert TAG_INTERRUPTED in experiment.tags

    registered = run_adapter_stage(config, progress=lines.append)  # the same process and Ray
    assert sorted(registered) == ["fruit", "water"], "\n".join(lines)
    assert any("resuming" in line for line in lines), "\n".join(lines)
    assert kept is caught.value
