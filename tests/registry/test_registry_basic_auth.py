"""A real `mlflow server --app-name basic-auth`: credentials come from the environment, a missing
or wrong login is one clear line, and secrets never reach params, tags or messages."""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import _wait_healthy, free_port, uid, write_adapter
from mlflow import MlflowClient

from adapterfleet.registry import (
    RegistryError,
    adapter_model_name,
    check_tracking_uri,
    ensure_experiment,
    open_trial_run,
    pull,
    register_version,
)

pytestmark = pytest.mark.integration
pytest.importorskip("flask_wtf", reason="the basic-auth app needs mlflow[auth] (make install)")

ADMIN = "admin"  # the auth app's bootstrap user (basic_auth.ini)


@pytest.fixture(scope="module")
def auth_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """(uri, admin password) of a real basic-auth tracking server on loopback."""
    root = tmp_path_factory.mktemp("mlflow-auth")
    password = secrets.token_urlsafe(18)
    port = free_port()
    exe = Path(sys.executable).with_name("mlflow")
    command = [
        str(exe) if exe.exists() else shutil.which("mlflow") or "mlflow",
        "server",
        "--app-name",
        "basic-auth",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--workers",
        "1",
        "--backend-store-uri",
        f"sqlite:///{root / 'server.db'}",
        "--artifacts-destination",
        str(root / "artifacts"),
    ]
    env = {
        **os.environ,
        "MLFLOW_DISABLE_TELEMETRY": "true",
        "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false",
        "MLFLOW_FLASK_SERVER_SECRET_KEY": secrets.token_hex(16),
        "MLFLOW_AUTH_ADMIN_PASSWORD": password,
    }
    log = open(root / "server.log", "wb")  # noqa: SIM115 - closed at teardown
    proc = subprocess.Popen(  # the auth db (basic_auth.db) lands in cwd=root
        command, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=root, start_new_session=True
    )
    uri = f"http://127.0.0.1:{port}"
    try:
        _wait_healthy(uri, proc, root / "server.log")
        yield uri, password
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)  # the group this fixture created
            proc.wait(timeout=10)
        log.close()


def test_credentials_from_the_environment_work_end_to_end(
    auth_server: tuple[str, str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    uri, password = auth_server
    monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", ADMIN)
    monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", password)
    check_tracking_uri(uri)
    experiment = ensure_experiment(uri, uid("auth"))
    params = {"lr": 0.001, "hf_token": "hf_" + "x" * 30, "store": f"postgresql://u:{password}@db/x"}
    run = open_trial_run(uri, experiment, None, uid("trial"), params=params)
    folder = write_adapter(tmp_path / "adapter")
    run.log_artifacts(folder, "adapter")
    run.end()
    name = adapter_model_name(uid("auth"), "rte")
    version = register_version(uri, name, run.run_id, "adapter", folder / "adapter.safetensors")
    pulled = pull(uri, name, tmp_path / "pulled")
    assert (pulled / "adapter.safetensors").read_bytes() == (
        folder / "adapter.safetensors"
    ).read_bytes()

    logged = MlflowClient(uri).get_run(run.run_id).data
    assert logged.params == {"lr": "0.001", "hf_token": "***", "store": "***"}
    assert all(password not in value for value in [*logged.params.values(), *logged.tags.values()])
    assert version.version == 1 and version.aliases == ("best",)


@pytest.mark.parametrize("login", ["none", "wrong"])
def test_a_missing_or_wrong_login_is_one_clear_line(
    auth_server: tuple[str, str], monkeypatch: pytest.MonkeyPatch, login: str
) -> None:
    uri, password = auth_server
    monkeypatch.delenv("MLFLOW_TRACKING_USERNAME", raising=False)
    monkeypatch.delenv("MLFLOW_TRACKING_PASSWORD", raising=False)
    wrong = password[::-1] + "!"
    if login == "wrong":
        monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", ADMIN)
        monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", wrong)
    with pytest.raises(RegistryError) as caught:
        check_tracking_uri(uri)
    message = str(caught.value)
    expected = "are not set" if login == "none" else "were refused"
    assert "HTTP 401" in message and expected in message
    assert "MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD" in message
    assert "\n" not in message and password not in message and wrong not in message
