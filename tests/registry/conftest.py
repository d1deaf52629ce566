"""Fixtures for the registry tests: a real SQLite store, a real `mlflow server`, a TCP proxy."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

os.environ["MLFLOW_DISABLE_TELEMETRY"] = "true"
os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")

from adapterfleet.registry import default_tracking_uri, ensure_experiment

SERVER_START_DEADLINE_S = 90.0


def uid(stem: str) -> str:
    return f"{stem}-{uuid.uuid4().hex[:8]}"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def write_adapter(folder: Path, seed: int = 0) -> Path:
    """A small real adapter folder: adapter_config.json + adapter.safetensors."""
    from safetensors.numpy import save_file

    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    save_file(
        {
            "down.weight": rng.standard_normal((4, 16)).astype(np.float32),
            "up.weight": rng.standard_normal((16, 4)).astype(np.float32),
        },
        str(folder / "adapter.safetensors"),
    )
    (folder / "adapter_config.json").write_text(json.dumps({"reduction_factor": 4, "seed": seed}))
    return folder


@pytest.fixture(scope="session")
def sqlite_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("mlflow-home")


@pytest.fixture(scope="session")
def sqlite_uri(sqlite_home: Path) -> str:
    """One SQLite store for the session (creating its schema takes seconds)."""
    return default_tracking_uri(sqlite_home)


@pytest.fixture(scope="session")
def sqlite_experiment(sqlite_uri: str) -> str:
    return ensure_experiment(sqlite_uri, "registry-tests")


@pytest.fixture(scope="session")
def mlflow_server_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("mlflow-server")


@pytest.fixture(scope="session")
def mlflow_server(mlflow_server_root: Path) -> Iterator[str]:
    """A real `mlflow server` on a free loopback port; yields its http URI."""
    with _server(mlflow_server_root) as uri:
        yield uri


@pytest.fixture(scope="session")
def mlflow_server_db(mlflow_server: str, mlflow_server_root: Path) -> Path:
    """The SQLite file the session's `mlflow_server` keeps its runs and models in."""
    return mlflow_server_root / "server.db"


@pytest.fixture(scope="session")
def auth_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """(uri, admin password) of a real `mlflow server --app-name basic-auth` on loopback, one
    for the session (two test modules use it); its admin user is `admin` (the auth app's
    default)."""
    password = secrets.token_urlsafe(18)
    env = {
        "MLFLOW_FLASK_SERVER_SECRET_KEY": secrets.token_hex(16),
        "MLFLOW_AUTH_ADMIN_PASSWORD": password,
    }
    root = tmp_path_factory.mktemp("mlflow-auth")  # its basic_auth.db lands here (the cwd)
    with _server(root, ["--app-name", "basic-auth"], env) as uri:
        yield uri, password


@contextlib.contextmanager
def _server(
    root: Path,
    args: list[str] | None = None,
    env: dict[str, str] | None = None,
    backend: Path | None = None,
) -> Iterator[str]:
    """A real `mlflow server` on a free loopback port, on `backend` (a SQLite file; default
    `root/server.db`); yields its http URI."""
    port = free_port()
    exe = Path(sys.executable).with_name("mlflow")
    command = [
        str(exe) if exe.exists() else shutil.which("mlflow") or "mlflow",
        "server",
        *(args or []),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--workers",
        "1",
        "--backend-store-uri",
        f"sqlite:///{backend or root / 'server.db'}",
        "--artifacts-destination",
        str(root / "artifacts"),
    ]
    full_env = {
        **os.environ,
        "MLFLOW_DISABLE_TELEMETRY": "true",
        "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false",
        **(env or {}),
    }
    log = open(root / "server.log", "wb")  # noqa: SIM115 - closed at teardown
    proc = subprocess.Popen(
        command, stdout=log, stderr=subprocess.STDOUT, env=full_env, cwd=root,
        start_new_session=True,
    )  # fmt: skip
    uri = f"http://127.0.0.1:{port}"
    try:
        _wait_healthy(uri, proc, root / "server.log")
        yield uri
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # the group this fixture created
            proc.wait(timeout=10)
        log.close()


def _wait_healthy(uri: str, proc: subprocess.Popen[bytes], log_path: Path) -> None:
    deadline = time.monotonic() + SERVER_START_DEADLINE_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = log_path.read_text(errors="replace")[-2000:]
            pytest.fail(f"mlflow server exited with {proc.returncode}:\n{tail}")
        try:
            with urllib.request.urlopen(f"{uri}/health", timeout=1) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.25)
    pytest.fail(f"mlflow server at {uri} not healthy after {SERVER_START_DEADLINE_S:g}s")


class TcpProxy:
    """A loopback TCP forwarder that can be switched off and on, to simulate an outage."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.port = free_port()
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._running = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(16)
        listener.settimeout(0.1)
        self._running.set()
        self._thread = threading.Thread(target=self._accept, args=(listener,), daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._running.clear()
        if self._thread is not None:
            self._thread.join(timeout=5)
        with self._lock:
            for sock in self._sockets:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()
            self._sockets.clear()

    def _accept(self, listener: socket.socket) -> None:
        with listener:
            while self._running.is_set():
                try:
                    client, _ = listener.accept()
                except TimeoutError:
                    continue
                client.settimeout(None)
                upstream = socket.create_connection(("127.0.0.1", self.target_port))
                with self._lock:
                    self._sockets += [client, upstream]
                for src, dst in ((client, upstream), (upstream, client)):
                    threading.Thread(target=_pump, args=(src, dst), daemon=True).start()


def _pump(src: socket.socket, dst: socket.socket) -> None:
    try:
        while data := src.recv(65536):
            dst.sendall(data)
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            dst.shutdown(socket.SHUT_WR)


@pytest.fixture
def tcp_proxy() -> Iterator[Callable[[int], TcpProxy]]:
    proxies: list[TcpProxy] = []

    def make(target_port: int) -> TcpProxy:
        proxy = TcpProxy(target_port)
        proxies.append(proxy)
        return proxy

    yield make
    for proxy in proxies:
        proxy.stop()


@pytest.fixture
def new_name() -> Callable[[str], str]:
    """Unique names, so tests can share one store."""
    return uid


@pytest.fixture
def make_adapter() -> Callable[..., Path]:
    return write_adapter


@pytest.fixture
def logged_adapter(tmp_path: Path) -> Callable[..., tuple[str, Path]]:
    """Log a fresh adapter folder as artifact `adapter` of a new trial run.

    Returns (run_id, local weights file)."""
    from adapterfleet.registry import open_trial_run

    def log(uri: str, experiment_id: str, seed: int = 0) -> tuple[str, Path]:
        folder = write_adapter(tmp_path / uid("adapter"), seed)
        run = open_trial_run(uri, experiment_id, None, uid("trial"))
        run.log_artifacts(folder, "adapter")
        run.end()
        return run.run_id, folder / "adapter.safetensors"

    return log
