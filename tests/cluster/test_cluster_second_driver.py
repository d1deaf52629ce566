"""A second driver of one pipeline's sweep is refused while the first beats.

Two `adapterfleet submit`s of one config a second apart both ran the sweep: the second resumed
the trials the first was training, every epoch was logged twice, and both registered v1. The
sweep driver's heartbeat names its host and process; another sweep driver is refused while that
stamp is fresh, unless its process is gone from this host or its last stamp says it ended.
`fuse --wait` beside a sweep is not a second driver: waiting for its adapters is its purpose
(`tests/pipeline/test_pipeline_run.py` starts one before the sweep).
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from mlflow import MlflowClient

from adapterfleet.config import load_config
from adapterfleet.registry import default_tracking_uri, ensure_experiment
from adapterfleet.registry.errors import RegistryError
from adapterfleet.registry.heartbeat import (
    ADDRESS_KEY,
    HEARTBEAT_ENV,
    heartbeat,
    refuse_second_driver,
)
from adapterfleet.registry.tags import TAG_HEARTBEAT, TAG_SWEEP_DRIVER

BEATING = """
import sys, time
from adapterfleet.registry.heartbeat import heartbeat
with heartbeat(sys.argv[1], sys.argv[2], sweep=sys.argv[4] == "sweep"):
    print("beating", flush=True)
    time.sleep(float(sys.argv[3]))
"""


def _config(folder: Path) -> Path:
    (folder / "t.tsv").write_text("sentence\tlabel\nx y\t0\nz w\t1\n")
    spec = '{train: t.tsv, dev: t.tsv, text_fields: [sentence], label_names: ["0", "1"]}'
    text = f"name: twice\nstorage: {folder / 'store'}\ndata_root: .\ntasks:\n  a: {spec}\n"
    (folder / "pipe.yaml").write_text(text)
    return folder / "pipe.yaml"


def _beating(
    uri: str, experiment_id: str, seconds: float, role: str = "sweep"
) -> subprocess.Popen[str]:
    """Another process on this host that beats for the experiment, as a driver running its
    sweep does (`role` "sweep"), or as `fuse --wait` does (any other)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", BEATING, uri, experiment_id, str(seconds), role],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert proc.stdout is not None and proc.stdout.readline().strip() == "beating"
    return proc


@pytest.mark.integration
def test_run_is_refused_while_another_driver_beats_then_runs_once_it_is_killed(
    tmp_path: Path,
) -> None:
    path = _config(tmp_path)
    config = load_config(path)
    uri = default_tracking_uri(tmp_path / "store")
    experiment_id = ensure_experiment(uri, config.name)
    other = _beating(uri, experiment_id, 120)
    try:
        command = [str(Path(sys.executable).with_name("adapterfleet")), "run", "-c", str(path)]
        done = subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=tmp_path)
        said = done.stdout + done.stderr
        assert done.returncode != 0, said
        lines = [x for x in said.splitlines() if x.startswith("error:")]
        assert len(lines) == 1, said
        assert re.fullmatch(
            rf"error: another adapterfleet driver runs this pipeline's sweep \(process {other.pid} "
            rf"on {re.escape(socket.gethostname())}, its last heartbeat \d+ s ago\): two would "
            r"train the same trials twice; let it finish, stop it \(Ctrl-C in its terminal\), "
            r"or, if it was killed on another machine, run again in 1\d\d s, when it is taken "
            r"for gone \(a config of another storage that shares this pipeline's name, another "
            r"user's, collides so too: give it its own name\)",
            lines[0],
        ), lines[0]
        assert "ray" not in said.lower(), said  # refused before Ray started
        runs = MlflowClient(uri).search_runs([experiment_id])
        assert runs == []  # nothing written
    finally:
        other.send_signal(signal.SIGKILL)
        other.wait()
    refuse_second_driver(uri, experiment_id)  # killed on this host: gone at once


def test_a_driver_that_ended_or_went_silent_is_not_in_the_way(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    uri = default_tracking_uri(tmp_path / "store")
    experiment_id = ensure_experiment(uri, "twice")
    client = MlflowClient(uri)

    def stamp() -> str:
        return client.get_experiment(experiment_id).tags[TAG_SWEEP_DRIVER]

    other = _beating(uri, experiment_id, 0)  # beats once, ends, says so
    assert other.wait(timeout=60) == 0
    assert stamp().endswith(" ended")
    refuse_second_driver(uri, experiment_id)

    elsewhere = f"{int(time.time() * 1000)} 60 another-host {os.getpid()}"
    client.set_experiment_tag(experiment_id, TAG_SWEEP_DRIVER, elsewhere)
    with pytest.raises(RegistryError, match=r"\(process \d+ on another-host, its last heartbeat"):
        refuse_second_driver(uri, experiment_id)  # no process table to ask there: its beats
    submitted = f"{elsewhere} job=adapterfleet-demo-20261201-0a1b2c"  # a driver `submit` started
    client.set_experiment_tag(experiment_id, TAG_SWEEP_DRIVER, submitted)
    with pytest.raises(RegistryError, match=r"\(Ray job adapterfleet-demo-20261201-0a1b2c, pro"):
        refuse_second_driver(uri, experiment_id)  # named, so the user can stop it by its id
    with pytest.raises(RegistryError, match=r"\(adapterfleet stop adapterfleet-demo-20261201-0a"):
        refuse_second_driver(uri, experiment_id)
    at = f"{submitted} at=http://head-1:8265"  # the job server `submit` sent it to
    client.set_experiment_tag(experiment_id, TAG_SWEEP_DRIVER, at)
    stop = r"\(adapterfleet stop adapterfleet-demo-20261201-0a1b2c --address http://head-1:8265\)"
    with pytest.raises(RegistryError, match=stop):  # it lacked the address, which stop needs
        refuse_second_driver(uri, experiment_id)
    client.set_experiment_tag(experiment_id, TAG_SWEEP_DRIVER, f"{submitted} ended")
    refuse_second_driver(uri, experiment_id)  # the job ended and said so
    old = f"{int(time.time() * 1000) - 181_000} 60 another-host 12"
    client.set_experiment_tag(experiment_id, TAG_SWEEP_DRIVER, old)
    refuse_second_driver(uri, experiment_id)  # three intervals without a beat: gone

    monkeypatch.setenv(HEARTBEAT_ENV, "30")
    client.set_experiment_tag(experiment_id, TAG_SWEEP_DRIVER, elsewhere)
    refused = pytest.raises(RegistryError, match="another adapterfleet driver runs")
    with refused, heartbeat(uri, experiment_id, sweep=True):
        pass
    assert stamp() == elsewhere  # left as it was
    with heartbeat(uri, experiment_id):  # a fuse beside the sweep: beats, is not refused
        assert stamp() == elsewhere
        assert client.get_experiment(experiment_id).tags[TAG_HEARTBEAT].endswith(str(os.getpid()))
    client.set_experiment_tag(experiment_id, TAG_SWEEP_DRIVER, old)
    with heartbeat(uri, experiment_id, sweep=True), heartbeat(uri, experiment_id, sweep=True):
        refuse_second_driver(uri, experiment_id)  # its own fresh stamp is not another driver
        assert stamp().endswith(f"{socket.gethostname()} {os.getpid()}")
    job = {"metadata": {"job_submission_id": "adapterfleet-twice-1"}}  # what Ray gives a job
    monkeypatch.setenv("RAY_JOB_CONFIG_JSON_ENV_VAR", json.dumps(job))
    with heartbeat(uri, experiment_id, sweep=True):
        assert stamp().endswith(f"{socket.gethostname()} {os.getpid()} job=adapterfleet-twice-1")
    assert stamp().endswith(" job=adapterfleet-twice-1 ended")
    job["metadata"][ADDRESS_KEY] = "http://head-1:8265"  # what `submit` adds
    monkeypatch.setenv("RAY_JOB_CONFIG_JSON_ENV_VAR", json.dumps(job))
    with heartbeat(uri, experiment_id, sweep=True):
        assert stamp().endswith(" job=adapterfleet-twice-1 at=http://head-1:8265")


def test_a_fusion_waiting_beside_the_sweep_does_not_stop_it(tmp_path: Path) -> None:
    """`fuse --wait` started before the sweep beats for the experiment while it waits for the
    adapters: the sweep driver that then starts is not refused."""
    uri = default_tracking_uri(tmp_path / "store")
    experiment_id = ensure_experiment(uri, "twice")
    waiter = _beating(uri, experiment_id, 120, role="fuse")
    try:
        with heartbeat(uri, experiment_id, sweep=True):
            pass
    finally:
        waiter.send_signal(signal.SIGKILL)
        waiter.wait()
