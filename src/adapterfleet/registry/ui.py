"""The MLflow UI on a tracking store, started with this interpreter's mlflow (no activated venv
needed) and without the job workers a small machine does not need.

MLflow 3.17's UI opens in its GenAI view, where the experiment shows traces and the sidebar has
no model registry. The view is not taken from the experiment (its `mlflow.experimentKind` tag is
ignored while the UI's workflow switch is on, which OSS builds hard-wire) but from the URL's
`workflowType` parameter, else from the browser's last choice (localStorage
`mlflow.workflowType`, default `genai`). So every link printed here carries
`?workflowType=machine_learning`: the runs table and the model registry, whatever the browser
chose before.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from types import FrameType
from typing import IO

from adapterfleet.console import Say
from adapterfleet.registry import sqlite_read
from adapterfleet.registry.errors import RegistryError, safe_uri
from adapterfleet.registry.store import check_tracking_uri, get_client, sqlite_path

ML_VIEW = "workflowType=machine_learning"  # the UI's classic machine-learning view
STOP_GRACE_S = 15.0  # how long the UI has to stop on SIGTERM before it is killed
# What `mlflow ui` says on every start when it serves this host only; ours says where it serves.
LOCAL_NOTE = b"[MLflow] Security middleware enabled with default settings (localhost-only)"


@dataclass(frozen=True)
class UiLinks:
    """Where to point a browser: the pipeline's runs (None when the experiment does not exist
    yet), the experiment list and the model registry, all in the machine-learning view."""

    runs: str | None
    experiments: str
    models: str


def ui_links(base: str, experiment_id: str | None) -> UiLinks:
    """The links of the UI served at `base` (`http://host:port`)."""
    base = base.rstrip("/")
    runs = f"{base}/#/experiments/{experiment_id}/runs?{ML_VIEW}" if experiment_id else None
    return UiLinks(runs, f"{base}/#/experiments?{ML_VIEW}", f"{base}/#/models?{ML_VIEW}")


def local_base(host: str, port: int) -> str:
    """`http://host:port` of a UI bound to `host`; a wildcard address is shown as loopback."""
    host = "127.0.0.1" if host in ("0.0.0.0", "", "::") else host
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def experiment_id_of(uri: str, name: str) -> str | None:
    """The id of the active experiment `name`; None when it (or a SQLite store) is missing.
    A SQLite store is read directly, without MLflow, and never created here."""
    db = sqlite_path(uri)
    if db is not None:
        if not db.is_file():
            return None
        try:
            return sqlite_read.experiment_id(db, name)
        except sqlite_read.Unreadable:
            pass  # another schema: ask MLflow
    experiment = get_client(uri).get_experiment_by_name(name)
    if experiment is None or experiment.lifecycle_stage == "deleted":
        return None
    return str(experiment.experiment_id)


def ui_command(uri: str, host: str, port: int) -> list[str]:
    """The command that serves the MLflow UI of `uri` on `host:port`, one worker."""
    return [
        sys.executable,
        "-m",
        "mlflow",
        "ui",
        "--backend-store-uri",
        uri,
        "--registry-store-uri",  # said, it is the same store: MLflow's note on it is noise
        uri,
        "--host",
        host,
        "--port",
        str(port),
        "--workers",
        "1",
        "--uvicorn-opts",  # its start and stop lines only repeat ours; warnings still show
        "--log-level warning",
    ]


def serve_ui(uri: str, experiment: str, host: str, port: int, say: Say) -> int:
    """Serve the UI of `uri` on `host:port` until it is stopped, saying the links to experiment
    `experiment`'s runs and the model registry once it answers; its exit status, 0 when stopped
    by Ctrl-C or SIGTERM (the way a server ends). A tracking server (`http(s)://`) has its own
    UI: only its links are said."""
    server = uri.startswith(("http://", "https://"))
    if server:
        check_tracking_uri(uri)
    else:
        check_port_free(host, port)
    base = uri if server else local_base(host, port)
    links = ui_links(base, experiment_id_of(uri, experiment))
    if server:
        _say_links(links, uri, experiment, say)
        say(f"the tracking store {safe_uri(uri)} is a server: its UI is already there")
        return 0

    def ready() -> None:  # said once the server answers: a script that follows a link got in
        _say_links(links, uri, experiment, say)
        say(f"MLflow UI on {base} for {safe_uri(uri)} (Ctrl-C stops it)")

    local = host in ("127.0.0.1", "localhost", "::1")  # its note on other hosts is moot here
    drop = (LOCAL_NOTE,) if local else ()
    return run_until_stopped(ui_command(uri, host, port), drop, ready=(ready, host, port))


def check_port_free(host: str, port: int) -> None:
    """`host:port` can be bound now: otherwise MLflow's server would stop at once, after the
    links to it were said (they would lead to whatever holds the port)."""
    try:
        with socket.create_server((host, port)):
            pass
    except OSError as error:
        reason = os.strerror(error.errno) if error.errno else str(error)
        raise RegistryError(
            f"--port: cannot serve the UI on {host}:{port} ({reason}); "
            "choose another with --port (or --host)"
        ) from None


def _say_links(links: UiLinks, uri: str, experiment: str, say: Say) -> None:
    if links.runs:
        say(f"runs of {experiment!r}: {safe_uri(links.runs)}")
    else:
        say(f"no experiment {experiment!r} in {safe_uri(uri)} yet: {safe_uri(links.experiments)}")
    say(f"model registry: {safe_uri(links.models)}")


def run_until_stopped(
    command: list[str],
    drop: tuple[bytes, ...] = (),
    ready: tuple[Callable[[], None], str, int] | None = None,
) -> int:
    """Run `command` in its own process group until it ends or this process is interrupted
    (Ctrl-C, SIGTERM); then the whole group (mlflow ui and its uvicorn) is stopped. Its
    standard error is passed on but for lines that start with one of `drop`. `ready`: (what
    to call, host, port) once the server it starts accepts connections there."""
    env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    # MLflow's own import of a deprecated Starlette module warns at every start, with a path
    env.setdefault("PYTHONWARNINGS", "ignore:starlette.middleware.wsgi is deprecated")
    # a model version's page asks for its MLmodel file, and the server drew a download bar for it
    env.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    stderr = subprocess.PIPE if drop else None
    proc = subprocess.Popen(command, env=env, stderr=stderr, start_new_session=True)
    if proc.stderr is not None:
        threading.Thread(target=_pass_on, args=(proc.stderr, drop), daemon=True).start()
    main = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _interrupt) if main else None
    try:
        if ready is not None and _answers(proc, ready[1], ready[2]):
            ready[0]()
        return proc.wait()
    except KeyboardInterrupt:
        _stop_group(proc)
        return 0
    finally:
        if main:
            signal.signal(signal.SIGTERM, signal.SIG_DFL if previous is None else previous)
        if proc.poll() is None:  # an unexpected error: leave nothing running
            _stop_group(proc)


def _answers(proc: subprocess.Popen, host: str, port: int, within_s: float = 300.0) -> bool:
    """Wait until `host:port` accepts a connection; False when `proc` ended first, or after
    `within_s`."""
    deadline = time.monotonic() + within_s
    while proc.poll() is None and time.monotonic() < deadline:
        try:
            with socket.create_connection((host, port), timeout=1):
                return True
        except OSError:
            time.sleep(0.2)
    return False


def _pass_on(stream: IO[bytes], drop: tuple[bytes, ...]) -> None:
    """Copy `stream` to this process's standard error line by line, but for lines that start
    with one of `drop`."""
    with stream:
        for line in stream:
            if not line.startswith(drop):
                sys.stderr.write(line.decode(errors="replace"))
                sys.stderr.flush()


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def _stop_group(proc: subprocess.Popen[bytes]) -> None:
    for sig, grace in ((signal.SIGTERM, STOP_GRACE_S), (signal.SIGKILL, 10.0)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            continue
