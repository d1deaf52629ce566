"""A real single-node Ray head in token mode on loopback, torn down by the PIDs it started."""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")

RAY = Path(sys.executable).with_name("ray")
START_DEADLINE_S = 120.0
START_ATTEMPTS = 3


def free_ports(count: int) -> list[int]:
    """`count` distinct free ports: all held open at once, so no two calls hand out the same."""
    with contextlib.ExitStack() as stack:
        socks = [stack.enter_context(socket.socket()) for _ in range(count)]
        for sock in socks:
            sock.bind(("127.0.0.1", 0))
        return [int(sock.getsockname()[1]) for sock in socks]


@dataclass(frozen=True)
class RayHead:
    address: str  # http://127.0.0.1:<dashboard port>
    token: str
    temp_dir: Path
    pid: int
    gcs: str = ""  # 127.0.0.1:<port>: what a driver joins (ray.init, run --address)


# The dashboard serves jobs and the state API (nodes, tasks, actors) from separate module
# subprocesses (Ray 2.60's SubprocessModule), each ready on its own: the jobs API answering
# says nothing of the state API, whose first request could be dropped unanswered (a CI setup
# error: RemoteDisconnected on /api/v0/nodes right after /api/jobs/ answered).
READY_PATHS = ("/api/jobs/", "/api/v0/nodes?limit=1")


def _wait_ready(head: RayHead, proc: subprocess.Popen[bytes], log: Path) -> None:
    import requests

    headers = {"Authorization": f"Bearer {head.token}"}
    waiting = list(READY_PATHS)
    deadline = time.monotonic() + START_DEADLINE_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"ray start exited {proc.returncode}: {log.read_text()[-2000:]}")
        try:
            while waiting:
                r = requests.get(f"{head.address}{waiting[0]}", headers=headers, timeout=5)
                if r.status_code != 200:
                    break
                waiting.pop(0)
            if not waiting:
                return
        except requests.RequestException:
            pass
        time.sleep(1.0)
    raise RuntimeError(f"Ray head not ready in {START_DEADLINE_S}s: {log.read_text()[-2000:]}")


def _our_pids(head: RayHead, tree: bool = True) -> set[int]:
    """Processes naming our temp dir and (with `tree`) `ray start` and its descendants."""
    import psutil

    pids = set()
    if tree:
        pids.add(head.pid)
        with contextlib.suppress(psutil.Error):
            pids |= {p.pid for p in psutil.Process(head.pid).children(recursive=True)}
    marker = str(head.temp_dir)
    for proc in psutil.process_iter(["pid", "cmdline"]):
        cmdline = proc.info.get("cmdline") or []
        if any(part == marker or f"{marker}/" in part for part in cmdline):
            pids.add(proc.info["pid"])
    pids.discard(os.getpid())
    return pids


# On SIGTERM `ray start --block`, the GCS, the raylet and the agents shut down gracefully, which
# took up to the 15 s once allowed (teardowns of 16-18 s); a test's node keeps nothing, so what
# is still alive after this is killed.
TERM_GRACE_S = 3.0


def _teardown(head: RayHead) -> None:
    """SIGTERM to every process we started, SIGKILL to what is left after TERM_GRACE_S."""
    import psutil

    procs = []
    for pid in sorted(_our_pids(head)):
        with contextlib.suppress(psutil.Error):
            procs.append(psutil.Process(pid))
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            proc.terminate()
    _, alive = psutil.wait_procs(procs, timeout=TERM_GRACE_S)
    for proc in alive:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    psutil.wait_procs(alive, timeout=5)
    for pid in _our_pids(head, tree=False):  # started while we were stopping
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


@pytest.fixture(scope="module")
def ray_head() -> Iterator[RayHead]:
    """The head, started again (fresh ports, temp dir) when `ray start` exits: its raylet has a
    fixed 30 s to register with the GCS, which a loaded 2-core CI machine can overrun."""
    token = secrets.token_hex(32)
    failures: list[str] = []
    for _ in range(START_ATTEMPTS):
        proc, head, log = _start_head(token)
        try:
            _wait_ready(head, proc, log)
        except RuntimeError as failed:
            failures.append(str(failed))
            _stop(head, proc)
            continue
        try:
            yield head
        finally:
            _stop(head, proc)
        return
    attempts = "\n\n".join(f"attempt {i}: {text}" for i, text in enumerate(failures, 1))
    raise RuntimeError(f"the Ray head did not start:\n{attempts}")


def _start_head(token: str) -> tuple[subprocess.Popen[bytes], RayHead, Path]:
    temp_dir = Path(tempfile.mkdtemp(prefix="af-cluster-", dir="/tmp"))
    ports = ("node-manager", "object-manager", "ray-client-server", "dashboard-agent-listen")
    ports += ("dashboard-agent-grpc", "runtime-env-agent", "metrics-export")
    port, dashboard, *named = free_ports(2 + len(ports))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_ADDRESS", "RAY_AUTH"))}
    env.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=token, RAY_USAGE_STATS_ENABLED="0")
    env["PATH"] = f"{RAY.parent}{os.pathsep}{env.get('PATH', '')}"
    cmd = [str(RAY), "start", "--head", "--block", "--disable-usage-stats"]
    cmd += [f"--port={port}", "--num-cpus=1", "--num-gpus=0", f"--temp-dir={temp_dir}"]
    cmd += ["--dashboard-host=127.0.0.1", f"--dashboard-port={dashboard}"]
    cmd += ["--include-log-monitor=false", "--object-store-memory=100000000"]
    cmd += [f"--{name}-port={number}" for name, number in zip(ports, named, strict=True)]
    log = temp_dir / "ray-start.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            cmd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    head = RayHead(f"http://127.0.0.1:{dashboard}", token, temp_dir, proc.pid, f"127.0.0.1:{port}")
    return proc, head, log


def _stop(node: RayHead, proc: subprocess.Popen[bytes]) -> None:
    """A node this module (or cluster_support) started: its processes, then its temp dir."""
    _teardown(node)
    proc.wait(timeout=30)
    shutil.rmtree(node.temp_dir, ignore_errors=True)
