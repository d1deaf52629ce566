"""Ctrl-C while the fusion trains, in a process that stays in Ray (a notebook's kernel calling
`run_pipeline`): the fusion's Ray task is cancelled, its run ends KILLED and nothing is
registered behind the caller's back. Before, the KeyboardInterrupt left the gate thread waiting
on the task, which trained on and registered its fusion after the caller had stopped it."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest
import ray
from tuning_support import config_document, runs_of

from adapterfleet.config import parse_config
from adapterfleet.orchestration.pipeline import run_pipeline
from adapterfleet.registry import fusion_model_name, get_version
from adapterfleet.registry.store import get_client
from adapterfleet.registry.tags import TAG_INTERRUPTED
from adapterfleet.training.workdir import checkpoint_epoch

pytestmark = pytest.mark.integration
FUSION_EPOCHS = 30  # far more than the test waits for: a fusion that goes on would show
START_DEADLINE_S = 420
FREED_DEADLINE_S = 15


def fusion_checkpoints(storage: Path) -> list[int]:
    folders = storage.glob("fusion/fruit/*/checkpoints/epoch-*")
    return sorted(e for e in (checkpoint_epoch(f) for f in folders) if e is not None)


def _ctrl_c_after_first_fusion_epoch(storage: Path, armed: threading.Event) -> None:
    deadline = time.monotonic() + START_DEADLINE_S
    while armed.is_set() and time.monotonic() < deadline:
        if fusion_checkpoints(storage):
            if armed.is_set():
                os.kill(os.getpid(), signal.SIGINT)
            return
        time.sleep(0.05)


def test_ctrl_c_during_the_fusion_cancels_it_in_a_process_that_stays_in_ray(
    ray_local: None, tiny_model: Path, tmp_path: Path
) -> None:
    document = config_document(tmp_path, tiny_model)
    document["adapters"]["reduction_factors"] = [4]
    training = {"max_epochs": FUSION_EPOCHS, "patience": FUSION_EPOCHS}
    training.update(batch_size=16, learning_rate=0.01, device="cpu")
    document["fusion"] = {"targets": {"fruit": "all"}, "training": training}
    config = parse_config(document, tmp_path)
    storage = tmp_path / "runs"
    free_before = float(ray.available_resources().get("CPU", 0.0))
    armed = threading.Event()
    armed.set()
    threading.Thread(
        target=_ctrl_c_after_first_fusion_epoch, args=(storage, armed), daemon=True
    ).start()
    lines: list[str] = []
    try:
        with pytest.raises(KeyboardInterrupt):
            run_pipeline(config, say=lines.append)
    finally:
        armed.clear()
    log = "\n".join(lines)

    deadline = time.monotonic() + FREED_DEADLINE_S
    while ray.available_resources().get("CPU", 0.0) < free_before:
        assert time.monotonic() < deadline, (ray.available_resources(), log)
        time.sleep(0.2)
    epochs = fusion_checkpoints(storage)
    time.sleep(5)  # a tiny fusion epoch takes about a second here
    assert fusion_checkpoints(storage) == epochs, "the fusion trained on after Ctrl-C"
    assert epochs[-1] < FUSION_EPOCHS

    uri = config.tracking_uri
    fusions = runs_of(uri, "fusion")
    assert [run.info.status for run in fusions] == ["KILLED"], log
    assert "fusion fruit: failed" not in log  # `failed: TaskCancelledError` for a stop
    assert get_version(uri, fusion_model_name(config.registry_prefix, "fruit")) is None
    experiment = get_client(uri).get_experiment_by_name(config.name)
    assert TAG_INTERRUPTED in experiment.tags
