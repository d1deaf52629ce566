"""Issue #6: a Ray worker node leaves a two-node loopback cluster mid-sweep (its raylet is
SIGKILLed once a trial on it finished an epoch). Tune retries its trials on the head node from
their checkpoints in the shared storage, and the sweep completes with every
trial finished once in MLflow, each epoch logged once, one registered version per task."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
import yaml
from cluster_support import (
    alive_nodes,
    cluster_conftest,
    gcs_port,
    ray_worker_node,
    state_list,
)
from fault_support import RestartableMlflowServer, checkpoint_epochs, sweep_document, wait_for
from tuning_support import metric_steps, runs_of, version_numbers

from adapterfleet.tuning.spec import trial_id

pytestmark = pytest.mark.integration
ray_head = cluster_conftest.ray_head  # the token-mode head of tests/cluster, 1 CPU
DRIVER = Path(__file__).with_name("fault_driver.py")
EPOCHS = 6
TASKS = ("fruit", "water")
RFS = (4, 8)
ON_WORKER_DEADLINE_S = 300.0
SWEEP_DEADLINE_S = 600.0
NODE_GONE_DEADLINE_S = 120.0


def trial_actors_on(head, node_id: str) -> list[dict]:  # noqa: ANN001 - conftest's RayHead
    actors = state_list(head, "actors", {"class_name": "ImplicitFunc", "state": "ALIVE"})
    return [a for a in actors if a.get("node_id") == node_id]


def tune_results(storage: Path) -> dict[str, list[dict]]:
    """Trial id -> the per-epoch results Tune recorded for it (they carry `pid`, `node_ip`)."""
    found: dict[str, list[dict]] = {}
    for path in storage.glob("ray/*/*/result.json"):
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        for row in rows:
            if "epoch" in row and not row.get("final"):
                c = row["config"]
                key = trial_id(c["task"], c["reduction_factor"], c["learning_rate"], c["seed"])
                found.setdefault(key, []).append(row)
    return found


def raylet_of(temp_dir: Path) -> psutil.Process:
    """The raylet of the node started with `--temp-dir=temp_dir` (its command line names it)."""
    for proc in psutil.process_iter(["cmdline"]):
        cmdline = proc.info.get("cmdline") or []
        if cmdline and cmdline[0].endswith("raylet") and any(str(temp_dir) in c for c in cmdline):
            return proc
    raise AssertionError(f"no raylet with temp dir {temp_dir}")


@contextlib.contextmanager
def sweep_driver(config: Path, address: str, token: str, log: Path) -> Iterator[subprocess.Popen]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_ADDRESS", "RAY_AUTH"))}
    env.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=token, PYTHONUNBUFFERED="1")
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-u", str(DRIVER), "sweep", str(config), address],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
    try:
        yield proc
    finally:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)  # the group this test created
        proc.wait(timeout=30)


def test_a_lost_worker_node_s_trials_finish_on_the_head(
    ray_head,  # noqa: ANN001 - conftest's RayHead
    tiny_model: Path,
    tmp_path: Path,
    restartable_mlflow_server: RestartableMlflowServer,
) -> None:
    uri = restartable_mlflow_server.uri
    # 3,000 examples an epoch: on a quiet machine a 400-example trial finished its six epochs
    # in the seconds between the kill and the node leaving, so nothing was retried
    document = sweep_document(
        tmp_path, tiny_model, tasks=TASKS, reduction_factors=RFS, train_examples=3000
    )
    document["tracking_uri"] = uri
    config = tmp_path / "pipeline.yaml"
    config.write_text(yaml.safe_dump(document))
    storage = tmp_path / "runs"
    log = tmp_path / "driver.log"
    address = f"127.0.0.1:{gcs_port(ray_head)}"

    with (
        ray_worker_node(ray_head, num_cpus=2) as worker,
        sweep_driver(config, address, ray_head.token, log) as driver,
    ):
        worker_pids: set[int] = set()

        def epoch_done_on_worker() -> dict[str, int]:
            """Trials of which the worker's actors reported a finished epoch."""
            assert driver.poll() is None, log.read_text()[-3000:]
            pids = {a["pid"] for a in trial_actors_on(ray_head, worker.node_id)}
            worker_pids.update(pids)
            results = tune_results(storage)
            return {t: r[-1]["epoch"] for t, r in results.items() if r[-1].get("pid") in pids}

        on_worker = wait_for(
            "an epoch finished on the worker", epoch_done_on_worker, ON_WORKER_DEADLINE_S, 0.5
        )
        raylet_of(worker.temp_dir).kill()
        epochs_at_kill = checkpoint_epochs(storage)
        wait_for(
            "the worker node to leave",
            lambda: all(n["node_id"] != worker.node_id for n in alive_nodes(ray_head)),
            NODE_GONE_DEADLINE_S,
            1.0,
        )
        driver.wait(timeout=SWEEP_DEADLINE_S)
    output = log.read_text()
    print(output[-5000:])
    print(f"on the worker at the kill (trial: epoch): {on_worker}; checkpoints {epochs_at_kill}")
    assert driver.returncode == 0, output[-5000:]
    assert all(epoch < EPOCHS for epoch in on_worker.values()), "killed too late"
    for trial in on_worker:
        retried = rf"trial {trial}: failed \(its Ray worker .*died: .*\), retrying from its last"
        assert re.search(retried, output), trial
    heads = [n for n in alive_nodes(ray_head) if n.get("is_head_node")]
    assert [n["node_id"] for n in alive_nodes(ray_head)] == [n["node_id"] for n in heads]
    actors = state_list(ray_head, "actors", {"class_name": "ImplicitFunc"})  # dead ones too
    head_pids = {a["pid"] for a in actors if a.get("node_id") == heads[0]["node_id"]}
    results = tune_results(storage)
    for trial, epoch in on_worker.items():  # went on after its checkpoint, on the head
        epochs = [row["epoch"] for row in results[trial]]
        assert epochs == sorted(set(epochs)) and epochs[-1] == EPOCHS, (trial, epochs)
        after = [row for row in results[trial] if row["pid"] not in worker_pids]
        assert after and after[0]["epoch"] > epoch, (trial, epochs)
        assert {row["pid"] for row in after} <= head_pids, (after, head_pids)

    trial_runs = runs_of(uri, "trial")
    expected = sorted(f"{t}-rf{rf}-lr0.01-s0" for t in TASKS for rf in RFS)
    assert sorted(r.data.tags["adapterfleet.trial_id"] for r in trial_runs) == expected
    for run in trial_runs:  # one run per trial, finished, no epoch logged twice
        assert run.info.status == "FINISHED", run.info
        steps = metric_steps(uri, run.info.run_id, "dev_accuracy")
        assert steps == list(range(1, EPOCHS + 1)), (run.info.run_name, steps)
    for task in TASKS:
        assert f"REGISTERED {task} tinysweep.adapter.{task} v1" in output
        assert version_numbers(uri, f"tinysweep.adapter.{task}") == [1]
