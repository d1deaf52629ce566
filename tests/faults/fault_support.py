"""Helpers of the fault tests: the tiny sweep world of tests/tuning_support.py with longer trials,
an `mlflow server` that can be stopped and started again on the same port and store, polling."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from cluster_support import registry_conftest
from tuning_support import config_document, write_tasks

STOP_DEADLINE_S = 30.0
FIRST_CHECKPOINT_DEADLINE_S = 300.0
ACTOR_DEADLINE_S = 60.0


def sweep_document(
    root: Path,
    model: Path,
    *,
    tasks: tuple[str, ...] = ("fruit",),
    reduction_factors: tuple[int, ...] = (4,),
    epochs: int = 6,
    train_examples: int = 400,
) -> dict[str, Any]:
    """The sweep tests' config with fewer tasks, more epochs and more examples, so that a trial
    is still training for some seconds after its first epoch checkpoint. A trial takes one CPU:
    a node of one CPU (the lost-node test's head) can take it over."""
    document = config_document(root, model)
    document["resources"] = {"cpu": 1}
    all_tasks = write_tasks(Path(document["data_root"]), train=train_examples, dev=40)
    document["tasks"] = {name: all_tasks[name] for name in tasks}
    document["adapters"]["reduction_factors"] = list(reduction_factors)
    document["adapters"]["training"]["max_epochs"] = epochs
    document["adapters"]["training"]["patience"] = epochs  # no early stop
    return document


def checkpoint_epochs(storage: Path) -> dict[str, int]:
    """Trial id -> newest finished epoch among its own loop checkpoints (0 when none yet)."""
    newest: dict[str, int] = {}
    for state in storage.glob("sweeps/*/*/checkpoints/epoch-*/trainer_state.json"):
        trial, suffix = state.parents[2].name, state.parent.name.split("-", 1)[1]
        if not suffix.isdigit():  # a staging folder (`epoch-0003.tmp`)
            continue
        epoch = int(suffix)
        newest[trial] = max(newest.get(trial, 0), epoch)
    return newest


def wait_for(what: str, predicate: Any, timeout_s: float, poll_s: float = 0.05) -> Any:
    """Poll `predicate` until it returns something truthy; AssertionError after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(poll_s)
    raise AssertionError(f"timed out after {timeout_s:g}s waiting for {what}")


def tune_reported_epochs(storage: Path) -> list[int]:
    """The `epoch` of every per-epoch result Tune recorded for the (only) trial, in order."""
    results = sorted(storage.glob("ray/*/*/result.json"))
    assert len(results) == 1, results
    rows = [json.loads(line) for line in results[0].read_text().splitlines() if line.strip()]
    return [int(row["epoch"]) for row in rows if "epoch" in row and not row.get("final")]


def actor_pids(class_name: str) -> list[int]:
    """PIDs of this Ray session's live worker processes that run an actor of `class_name` (Tune
    runs a function trainable as `ImplicitFunc`, Ray Train its workers as `RayTrainWorker`),
    lowest first.

    Found the way an operator finds them, in the process table: Ray titles an actor's process
    `ray::<class>` or `ray::<class>.<method>`, and its parent is the raylet of the session. Not
    from the GCS actor table: on CI a killer that queried it from this thread once waited through
    a whole trial and killed nothing, and that query is the likeliest place it waited."""
    import ray

    session = Path(ray._private.worker._global_node.get_session_dir_path()).name.encode()
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        title, parent, state = _process(entry)
        if title != f"ray::{class_name}" and not title.startswith(f"ray::{class_name}."):
            continue
        if state != "Z" and session in _cmdline(Path("/proc") / str(parent)):
            pids.append(int(entry.name))
    return sorted(pids)


def _cmdline(entry: Path) -> bytes:
    try:
        return entry.joinpath("cmdline").read_bytes()
    except OSError:  # the process is gone
        return b""


def _process(entry: Path) -> tuple[str, int, str]:
    """(title, parent pid, state letter) of the process at /proc/<pid>; ("", 0, "") if gone."""
    try:
        stat = entry.joinpath("stat").read_text()
    except OSError:
        return "", 0, ""
    state, parent = stat.rsplit(")", 1)[1].split()[:2]
    title = _cmdline(entry).split(b"\0")[0].strip().decode(errors="replace")
    return title, int(parent), state


class ActorKiller(threading.Thread):
    """Once the first epoch checkpoint exists under `storage`, SIGKILLs the last of the
    `count` alive actors of `class_name` (a trial's actor, or one of its Ray Train workers)."""

    def __init__(self, storage: Path, class_name: str, count: int = 1) -> None:
        super().__init__(daemon=True)
        self.storage, self.class_name, self.count = storage, class_name, count
        self.killed_pid: int | None = None
        self.epoch_at_kill: int | None = None
        self.error: BaseException | None = None
        self.stage = "not started"  # what it waits for, for the message of a test that fails

    def run(self) -> None:
        try:
            self.stage = "waiting for a first epoch checkpoint"
            first = lambda: checkpoint_epochs(self.storage)  # noqa: E731
            wait_for("a first epoch checkpoint", first, FIRST_CHECKPOINT_DEADLINE_S)
            self.stage = f"listing the {self.class_name} actors"
            actors = lambda: actor_pids(self.class_name)  # noqa: E731
            pids = wait_for(f"{self.class_name} actors", actors, ACTOR_DEADLINE_S, 0.2)
            self.stage = "killing"
            assert len(pids) == self.count, f"expected {self.count} {self.class_name}, got {pids}"
            self.epoch_at_kill = max(checkpoint_epochs(self.storage).values())
            os.kill(pids[-1], signal.SIGKILL)
            self.killed_pid = pids[-1]
        except BaseException as error:  # noqa: BLE001 - re-raised by the test
            self.error = error


class RestartableMlflowServer:
    """`mlflow server` on a fixed loopback port with a fixed SQLite store and artifact root;
    `stop()` ends its whole process group (the one `start()` created), `start()` starts it
    again exactly as before."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.port = registry_conftest.free_port()
        self.uri = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def command(self) -> list[str]:
        exe = Path(sys.executable).with_name("mlflow")
        return [
            str(exe) if exe.exists() else shutil.which("mlflow") or "mlflow",
            "server",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--workers",
            "1",
            "--backend-store-uri",
            f"sqlite:///{self.root / 'server.db'}",
            "--artifacts-destination",
            str(self.root / "artifacts"),
        ]

    def start(self) -> None:
        assert self.proc is None, "the server is running"
        self.starts += 1
        log_path = self.root / f"server-{self.starts}.log"
        env = {
            **os.environ,
            "MLFLOW_DISABLE_TELEMETRY": "true",
            "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false",
        }
        with open(log_path, "wb") as log:
            self.proc = subprocess.Popen(
                self.command(),
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=self.root,
                start_new_session=True,
            )
        registry_conftest._wait_healthy(self.uri, self.proc, log_path)

    def stop(self) -> None:
        """SIGTERM to the server's group, SIGKILL after STOP_DEADLINE_S; returns once the port
        refuses connections."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=STOP_DEADLINE_S)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        deadline = time.monotonic() + STOP_DEADLINE_S
        while _group_alive(proc.pid) or self.accepting():
            if time.monotonic() > deadline + 10:
                raise AssertionError(f"mlflow server on port {self.port} does not stop")
            if time.monotonic() > deadline:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
            time.sleep(0.1)

    def accepting(self) -> bool:
        with socket.socket() as sock:
            sock.settimeout(1)
            return sock.connect_ex(("127.0.0.1", self.port)) == 0


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True
