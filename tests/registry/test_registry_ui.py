"""`adapterfleet ui` started from the installed console script, as a person starts it: no
activated venv (a bare `mlflow` is not on PATH), a real SQLite store holding the pipeline's
experiment, a run and a registered model, read back over MLflow's REST API; the link it prints
opens that experiment's runs in the machine-learning view; stopping it leaves nothing running."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from adapterfleet.registry import (
    RegistryError,
    default_tracking_uri,
    ensure_experiment,
    register_version,
)
from adapterfleet.registry.ui import ML_VIEW, experiment_id_of, local_base, serve_ui, ui_links

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
START_DEADLINE_S = 90.0
STOP_DEADLINE_S = 30.0
EXPERIMENT = "ui-test"
LINK = re.compile(r"runs of 'ui-test': (http://\S+)")


def test_links_open_the_machine_learning_view() -> None:
    links = ui_links(local_base("127.0.0.1", 5001), "7")
    assert links.runs == f"http://127.0.0.1:5001/#/experiments/7/runs?{ML_VIEW}"
    assert links.models == f"http://127.0.0.1:5001/#/models?{ML_VIEW}"
    assert ML_VIEW == "workflowType=machine_learning"
    assert ui_links("http://mlflow.example:8080/", None).runs is None
    assert ui_links("http://mlflow.example:8080/", None).experiments == (
        f"http://mlflow.example:8080/#/experiments?{ML_VIEW}"
    )
    assert local_base("0.0.0.0", 80) == "http://127.0.0.1:80"
    assert local_base("::1", 80) == "http://[::1]:80"


def test_a_missing_sqlite_store_has_no_experiment_and_is_not_created(tmp_path: Path) -> None:
    uri = default_tracking_uri(tmp_path / "nowhere")
    assert experiment_id_of(uri, EXPERIMENT) is None
    assert not (tmp_path / "nowhere").exists()


@pytest.mark.integration
def test_a_tracking_server_gets_links_to_its_own_ui(mlflow_server: str) -> None:
    experiment_id = ensure_experiment(mlflow_server, "ui-test-server")
    said: list[str] = []
    assert serve_ui(mlflow_server, "ui-test-server", "127.0.0.1", free_port(), said.append) == 0
    runs = f"{mlflow_server}/#/experiments/{experiment_id}/runs?{ML_VIEW}"
    assert said[0] == f"runs of 'ui-test-server': {runs}"
    assert said[1] == f"model registry: {mlflow_server}/#/models?{ML_VIEW}"
    assert "is a server" in said[2]


def test_a_port_in_use_is_refused_before_the_links_are_said(tmp_path: Path) -> None:
    """MLflow's server used to stop at once with its own error line, after the links to the
    port were said (they led to whatever held it), and the command exited 0."""
    uri = default_tracking_uri(tmp_path / "runs")
    ensure_experiment(uri, "ui-busy")
    said: list[str] = []
    with socket.create_server(("127.0.0.1", 0)) as holder:
        port = holder.getsockname()[1]
        with pytest.raises(RegistryError) as refused:
            serve_ui(uri, "ui-busy", "127.0.0.1", port, said.append)
    assert str(refused.value).startswith(f"--port: cannot serve the UI on 127.0.0.1:{port} (")
    assert str(refused.value).endswith("choose another with --port (or --host)")
    assert said == []


@pytest.fixture
def demo_store(
    tmp_path: Path, logged_adapter: Callable[..., tuple[str, Path]]
) -> tuple[Path, str, str]:
    """(storage folder, experiment id, registered model name) of a fresh SQLite store."""
    storage = tmp_path / "runs"
    uri = default_tracking_uri(storage)
    experiment_id = ensure_experiment(uri, EXPERIMENT)
    run_id, weights = logged_adapter(uri, experiment_id)
    model = "ui-test.adapter.demo_sentiment"
    register_version(uri, model, run_id, "adapter", weights)
    return storage, experiment_id, model


@pytest.fixture
def console_ui(demo_store: tuple[Path, str, str], tmp_path: Path) -> Iterator[dict[str, Any]]:
    """`bin/adapterfleet ui` on a free port, PATH without the venv; stopped by its group."""
    storage, _, _ = demo_store
    script = Path(sys.executable).with_name("adapterfleet")
    assert script.is_file(), f"no console script beside {sys.executable}"
    venv_bin = str(script.parent)
    path = os.pathsep.join(
        p for p in os.environ.get("PATH", "").split(os.pathsep) if p and p != venv_bin
    )
    env = {**os.environ, "PATH": path, "MLFLOW_DISABLE_TELEMETRY": "true"}
    env.pop("VIRTUAL_ENV", None)
    env.pop("MLFLOW_TRACKING_URI", None)
    env.pop("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", None)  # as a user's shell has it: unset
    if (bare := shutil.which("mlflow", path=path)) is not None:
        assert Path(bare).resolve() != Path(venv_bin, "mlflow").resolve()
    port = free_port()
    command = [str(script), "ui", "-c", str(CONFIGS / "demo.yaml"), "--port", str(port)]
    command += ["-o", f"storage={storage}", "-o", f"name={EXPERIMENT}"]
    proc = subprocess.Popen(
        command, env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, start_new_session=True,
    )  # fmt: skip
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stdout or ()), daemon=True)
    reader.start()
    groups: list[int] = []
    try:
        yield {"proc": proc, "port": port, "lines": lines, "groups": groups, "reader": reader}
    finally:
        _stop(proc, groups)
        reader.join(timeout=5)


@pytest.mark.integration
def test_console_script_serves_the_store_without_the_venv_on_path(
    console_ui: dict[str, Any], demo_store: tuple[Path, str, str]
) -> None:
    _, experiment_id, model = demo_store
    proc, port, lines = console_ui["proc"], console_ui["port"], console_ui["lines"]
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + START_DEADLINE_S
    while not any("MLflow UI on" in line for line in lines) and time.monotonic() < deadline:
        assert proc.poll() is None, "".join(lines)
        time.sleep(0.05)
    # said once it answers: a script that waits for the line and follows a link got in (the
    # links came about 13 s before the server, and the request was refused)
    with urllib.request.urlopen(f"{base}/health", timeout=5) as response:
        assert response.status == 200
    console_ui["groups"] += _child_groups(proc.pid)  # mlflow ui runs in a group of its own

    experiment = _get(base, "experiments/get-by-name", {"experiment_name": EXPERIMENT})
    assert experiment["experiment"]["experiment_id"] == experiment_id
    found = _get(base, "registered-models/search", {"filter": f"name = '{model}'"})
    assert [m["name"] for m in found["registered_models"]] == [model]
    assert found["registered_models"][0]["latest_versions"][0]["version"] == "1"

    printed = "".join(lines)
    link = LINK.search(printed)
    assert link, printed
    assert link.group(1) == f"{base}/#/experiments/{experiment_id}/runs?{ML_VIEW}"
    assert f"model registry: {base}/#/models?{ML_VIEW}" in printed
    with urllib.request.urlopen(link.group(1).split("#")[0], timeout=10) as page:
        assert page.status == 200 and b"<html" in page.read(2000).lower()
    # what a model version's page asks for: the server drew `Downloading artifacts: 0%|` twice
    query = urllib.parse.urlencode({"path": "MLmodel", "name": model, "version": "1"})
    with pytest.raises(urllib.error.HTTPError):  # an adapter has no MLmodel file: 404
        urllib.request.urlopen(f"{base}/model-versions/get-artifact?{query}", timeout=30)

    groups = list(console_ui["groups"])
    _stop(proc, [])  # SIGTERM to the command's group only: it must stop its UI itself
    assert proc.returncode == 0, printed
    deadline = time.monotonic() + STOP_DEADLINE_S
    while any(map(_group_alive, groups)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not any(map(_group_alive, groups)), "the MLflow UI outlived `adapterfleet ui`"
    console_ui["reader"].join(timeout=5)
    printed = "".join(lines)  # uvicorn's start and stop lines and MLflow's note on other hosts
    assert "INFO:" not in printed and "Security middleware" not in printed, printed
    assert "Downloading artifacts" not in printed, printed  # a bar drawn with \r, no line
    assert printed.count("\n") == 3, printed  # the two links and where the UI is served


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _get(base: str, endpoint: str, query: dict[str, str]) -> dict[str, Any]:
    url = f"{base}/api/2.0/mlflow/{endpoint}?{urllib.parse.urlencode(query)}"
    with urllib.request.urlopen(url, timeout=30) as response:
        return dict(json.load(response))


def _child_groups(pid: int) -> list[int]:
    """The process groups of `pid`'s children (Linux /proc), other than `pid`'s own."""
    children = Path(f"/proc/{pid}/task/{pid}/children")
    if not children.is_file():
        return []
    return [os.getpgid(int(c)) for c in children.read_text().split() if _alive(int(c))]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _group_alive(pgid: int) -> bool:
    """Whether any process of group `pgid` still runs (zombies do not count)."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


def _stop(proc: subprocess.Popen[str], groups: list[int]) -> None:
    """SIGTERM the command's process group, SIGKILL it and `groups` if they do not stop."""
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=STOP_DEADLINE_S)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
    for pgid in groups:
        if _group_alive(pgid):
            os.killpg(pgid, signal.SIGKILL)
