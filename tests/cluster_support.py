"""Multi-node pieces for the cluster tests: a worker node joined to the token-mode head of
`conftest.py`, the `mlflow server` fixture of tests/registry, three keyword tasks.

The colleagues' helpers are loaded from their files by path (not `from conftest import`,
which resolves to whichever conftest pytest imported last).
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import ray  # noqa: F401
import tuning_support

TESTS = Path(__file__).resolve().parent

THIRD_TOPIC = ("music", ("guitar piano drum violin song melody flute choir", "desk lamp chair"))
WORKER_START_DEADLINE_S = 120.0
WORKER_START_ATTEMPTS = 3
STATE_API_ATTEMPTS = 3
# "[time E pid tid]": an error line of Ray's C++ logs (C is its fatal level, F glog's)
RAY_LOG_ERROR = re.compile(r"^\[[^\]]* [ECF] \d+ \d+\]")


def load_by_path(name: str, path: Path) -> ModuleType:
    """Import `path` as module `name` once (a second copy of a conftest is harmless)."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


cluster_conftest = load_by_path("af_tests_cluster_conftest", TESTS / "cluster" / "conftest.py")
registry_conftest = load_by_path("af_tests_registry_conftest", TESTS / "registry" / "conftest.py")


@dataclass(frozen=True)
class RayWorker:
    node_id: str
    temp_dir: Path
    pid: int


def auth_headers(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def gcs_port(head: Any) -> int:
    """The head's GCS port: the `--port=` of its `ray start` command (the head fixture does not
    keep it, and `ray_current_cluster` is written after the dashboard already answers)."""
    args = Path(f"/proc/{head.pid}/cmdline").read_bytes().decode().split("\0")
    return int(next(a for a in args if a.startswith("--port=")).split("=", 1)[1])


def alive_nodes(head: Any) -> list[dict[str, Any]]:
    """The cluster's alive nodes through the dashboard's state API."""
    return [n for n in all_nodes(head) if n.get("state") == "ALIVE"]


def all_nodes(head: Any) -> list[dict[str, Any]]:
    """Every node the cluster has known, alive or dead, through the dashboard's state API."""
    import requests

    for attempt in range(STATE_API_ATTEMPTS):
        try:
            response = requests.get(
                f"{head.address}/api/v0/nodes",
                params={"limit": 100, "detail": 1},
                headers=auth_headers(head.token),
                timeout=10,
            )
            break
        except requests.ConnectionError:  # the state module's subprocess dropped the request
            if attempt == STATE_API_ATTEMPTS - 1:
                raise
            time.sleep(2.0)
    response.raise_for_status()
    return list(response.json()["data"]["result"]["result"])


def state_list(head: Any, kind: str, filters: dict[str, str]) -> list[dict[str, Any]]:
    """`/api/v0/<kind>` (actors, tasks) with equality filters, detailed."""
    import requests

    params: list[tuple[str, Any]] = [("limit", 10000), ("detail", 1)]
    for key, value in filters.items():
        params += [("filter_keys", key), ("filter_predicates", "="), ("filter_values", value)]
    response = requests.get(
        f"{head.address}/api/v0/{kind}",
        params=params,
        headers=auth_headers(head.token),
        timeout=30,
    )
    response.raise_for_status()
    return list(response.json()["data"]["result"]["result"])


def worker_log_lines(temp_dirs: list[Path], needle: str) -> list[str]:
    """Lines holding `needle` in the Ray worker logs under `temp_dirs` (the nodes run without
    a log monitor, so tasks' prints stay there instead of reaching the job's logs)."""
    found = []
    for temp_dir in temp_dirs:
        for path in sorted(Path(temp_dir).glob("session_*/logs/worker-*.out")):
            text = path.read_text(errors="replace")
            found += [line.strip() for line in text.splitlines() if needle in line]
    return sorted(set(found))


@contextlib.contextmanager
def ray_worker_node(head: Any, num_cpus: int) -> Iterator[RayWorker]:
    """`ray start --address 127.0.0.1:<gcs port>` joined to `head` (same RAY_AUTH_MODE=token
    and RAY_AUTH_TOKEN; `ray start` has no auth flag), with its own --temp-dir (Ray allows one
    per node; without it the worker would use the head's) and every port chosen free, so it
    never meets another Ray on the machine. Torn down by PID with the head fixture's helper.

    `ray start` gives its raylet a fixed 30 s to register with the GCS (Ray 2.60 does not read
    RAY_raylet_start_wait_time_s, whatever its message says); on a loaded 2-core CI machine
    that can pass, so a start that exits is tried again, up to WORKER_START_ATTEMPTS times,
    each with fresh ports and temp dir. The error after the last names every attempt's cause."""
    failures: list[str] = []
    for _ in range(WORKER_START_ATTEMPTS):
        earlier = {str(n["node_id"]) for n in all_nodes(head)}  # a failed attempt's node too
        proc, handle, log = _start_worker(head, num_cpus)
        try:
            node_id = _wait_joined(head, proc, log, earlier)
        except WorkerStartFailed as failed:
            failures.append(str(failed))
            cluster_conftest._stop(handle, proc)
            continue
        try:
            yield RayWorker(node_id, handle.temp_dir, proc.pid)
        finally:
            cluster_conftest._stop(handle, proc)
        return
    attempts = "\n\n".join(f"attempt {i}: {text}" for i, text in enumerate(failures, 1))
    raise RuntimeError(f"the Ray worker node did not join the head:\n{attempts}")


class WorkerStartFailed(RuntimeError):
    """`ray start` of a worker exited before its node was alive in the cluster."""


def _start_worker(head: Any, num_cpus: int) -> tuple[subprocess.Popen[bytes], Any, Path]:
    port = gcs_port(head)
    temp_dir = Path(tempfile.mkdtemp(prefix="af-worker-", dir="/tmp"))
    ray_exe = cluster_conftest.RAY
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_ADDRESS", "RAY_AUTH"))}
    env.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=head.token, RAY_USAGE_STATS_ENABLED="0")
    env["PATH"] = f"{ray_exe.parent}{os.pathsep}{env.get('PATH', '')}"
    cmd = [str(ray_exe), "start", f"--address=127.0.0.1:{port}", "--block"]
    cmd += ["--disable-usage-stats", "--node-ip-address=127.0.0.1", f"--num-cpus={num_cpus}"]
    cmd += ["--num-gpus=0", f"--temp-dir={temp_dir}", "--object-store-memory=100000000"]
    cmd += ["--include-log-monitor=false"]
    ports = ("node-manager", "object-manager", "dashboard-agent-listen", "dashboard-agent-grpc")
    ports += ("runtime-env-agent", "metrics-export")
    numbers = cluster_conftest.free_ports(len(ports))
    cmd += [f"--{name}-port={number}" for name, number in zip(ports, numbers, strict=True)]
    log = temp_dir / "ray-start.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            cmd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    return proc, cluster_conftest.RayHead("", head.token, temp_dir, proc.pid), log


def _wait_joined(head: Any, proc: subprocess.Popen[bytes], log: Path, earlier: set[str]) -> str:
    """The node id of the new non-head node (not in `earlier`), once it is alive with its CPUs."""
    deadline = time.monotonic() + WORKER_START_DEADLINE_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise WorkerStartFailed(f"ray start exited {proc.returncode}: {_start_logs(log)}")
        nodes = alive_nodes(head)
        workers = [n for n in nodes if not n.get("is_head_node") and n["node_id"] not in earlier]
        if workers and workers[0].get("resources_total", {}).get("CPU"):
            return str(workers[0]["node_id"])
        time.sleep(1.0)
    raise WorkerStartFailed(f"not alive in {WORKER_START_DEADLINE_S}s: {_start_logs(log)}")


def _start_logs(log: Path) -> str:
    """The last lines of `ray start`'s output and of the raylet's own log, where a raylet that
    never registered says why."""
    parts = [log.read_text(errors="replace")[-1500:]]
    for path in sorted(log.parent.glob("session_2*/logs/raylet.out")):  # not session_latest
        lines = path.read_text(errors="replace").splitlines()
        errors = [line for line in lines if RAY_LOG_ERROR.match(line)]  # the cause, not the stack
        parts.append(f"--- {path.name} (errors, then the end):")
        parts += errors[-8:] + lines[-8:]
    return "\n".join(parts)


def write_three_tasks(folder: Path, train: int = 80, dev: int = 40) -> dict[str, Any]:
    """The two keyword tasks of tuning_support plus a third topic; the `tasks:` mapping."""
    tasks = tuning_support.write_tasks(folder, train, dev)
    name, topic = THIRD_TOPIC
    rng = random.Random(1)
    for split, count in (("train", train), ("dev", dev)):
        rows = tuning_support._rows(topic, count, rng)
        lines = ["text\tlabel"] + [f"{t}\t{y}" for t, y in rows]
        (folder / f"{name}_{split}.tsv").write_text("\n".join(lines) + "\n")
    tasks[name] = {**tasks["fruit"], "train": f"{name}_train.tsv", "dev": f"{name}_dev.tsv"}
    return tasks
