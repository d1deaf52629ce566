"""A real `mlflow server --app-name basic-auth`: credentials come from the environment, a missing
or wrong login is one clear line, and secrets never reach params, tags or messages."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
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


def test_credentials_from_the_environment_work_end_to_end(
    auth_server: tuple[str, str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    new_name: Callable[[str], str],
    make_adapter: Callable[..., Path],
) -> None:
    uri, password = auth_server
    monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", ADMIN)
    monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", password)
    check_tracking_uri(uri)
    experiment = ensure_experiment(uri, new_name("auth"))
    params = {"lr": 0.001, "hf_token": "hf_" + "x" * 30, "store": f"postgresql://u:{password}@db/x"}
    run = open_trial_run(uri, experiment, None, new_name("trial"), params=params)
    folder = make_adapter(tmp_path / "adapter")
    run.log_artifacts(folder, "adapter")
    run.end()
    name = adapter_model_name(new_name("auth"), "rte")
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
