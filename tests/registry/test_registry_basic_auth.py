"""A real `mlflow server --app-name basic-auth`: credentials come from the environment, a missing
or wrong login is one clear line, and secrets never reach params, tags or messages; `status`
reads it through its REST reader with the same login and the same clear lines."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from mlflow import MlflowClient

from adapterfleet.registry import (
    TAG_KIND,
    TAG_PARENT_RUN,
    TAG_SWEEP,
    TAG_TASK,
    TAG_TRIAL_ID,
    RegistryError,
    adapter_model_name,
    check_tracking_uri,
    ensure_experiment,
    list_models,
    open_trial_run,
    pull,
    register_version,
)
from adapterfleet.registry import models as registry_models
from adapterfleet.registry import status as registry_status
from adapterfleet.registry.status import experiment_runs_and_tags
from adapterfleet.results.status import status_by_name

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


# --------------------------------------------------------------------------- `status` on it


def _no_mlflow_client(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make MLflow's client path fail, so what answers is the REST reader alone."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("the MLflow client path was taken")

    monkeypatch.setattr(registry_status, "get_client", refuse)
    monkeypatch.setattr(registry_status, "check_tracking_uri", refuse)
    monkeypatch.setattr(registry_models, "get_client", refuse)


def test_status_reads_a_basic_auth_server_with_the_login_from_the_environment(
    auth_server: tuple[str, str],
    monkeypatch: pytest.MonkeyPatch,
    new_name: Callable[[str], str],
) -> None:
    uri, password = auth_server
    monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", ADMIN)
    monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", password)
    client = MlflowClient(uri, registry_uri=uri)
    name = new_name("auth-status")
    experiment = client.create_experiment(name, tags={"team": "a"})
    sweep = client.create_run(experiment, tags={TAG_KIND: "sweep", TAG_SWEEP: "s", TAG_TASK: "rte"})
    trial_tags = {TAG_TRIAL_ID: "t0", TAG_TASK: "rte", TAG_PARENT_RUN: sweep.info.run_id}
    trial = client.create_run(experiment, tags=trial_tags).info.run_id
    client.log_metric(trial, "best_dev_accuracy", 0.75)
    client.set_terminated(trial, "FINISHED")
    model = adapter_model_name(name, "rte")
    client.create_registered_model(model)
    client.create_model_version(model, f"runs:/{trial}/adapter", run_id=trial)
    client.set_registered_model_alias(model, "best", "1")

    _no_mlflow_client(monkeypatch)
    found = experiment_runs_and_tags(uri, name)
    assert found is not None
    runs, tags = found
    assert [r.run_id for r in runs] == [sweep.info.run_id, trial] and tags == {"team": "a"}
    assert [(m.name, m.version, m.aliases) for m in list_models(uri, name)] == [
        (model, 1, ("best",))
    ]
    status = status_by_name(name, uri)
    assert [(t.task, t.done, t.best, t.adapter_version) for t in status.tasks] == [
        ("rte", 1, 0.75, 1)
    ]


@pytest.mark.parametrize("login", ["none", "wrong"])
def test_status_without_a_good_login_is_one_clear_line(
    auth_server: tuple[str, str], monkeypatch: pytest.MonkeyPatch, login: str
) -> None:
    uri, password = auth_server
    monkeypatch.delenv("MLFLOW_TRACKING_USERNAME", raising=False)
    monkeypatch.delenv("MLFLOW_TRACKING_PASSWORD", raising=False)
    monkeypatch.setenv("HOME", "/nonexistent")  # no ~/.mlflow/credentials either
    wrong = password[::-1] + "!"
    if login == "wrong":
        monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", ADMIN)
        monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", wrong)
    _no_mlflow_client(monkeypatch)
    for read in (lambda: status_by_name("any", uri), lambda: list_models(uri, "any")):
        with pytest.raises(RegistryError) as caught:
            read()
        message = str(caught.value)
        expected = "are not set" if login == "none" else "were refused"
        assert message.startswith(f"tracking URI {uri}: ")
        assert "HTTP 401" in message and expected in message
        assert "MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD" in message
        assert "\n" not in message and password not in message and wrong not in message


def test_status_of_an_experiment_the_user_may_not_read_says_so(
    auth_server: tuple[str, str],
    monkeypatch: pytest.MonkeyPatch,
    new_name: Callable[[str], str],
) -> None:
    from mlflow.server.auth.client import AuthServiceClient

    uri, password = auth_server
    monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", ADMIN)
    monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", password)
    name, user, secret = new_name("hidden"), new_name("bob"), new_name("pw-of-bob-")
    experiment = MlflowClient(uri).create_experiment(name)
    admin = AuthServiceClient(uri)
    admin.create_user(user, secret)
    admin.grant_user_permission(user, "experiment", experiment, "DENY")
    monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", user)
    monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", secret)
    _no_mlflow_client(monkeypatch)
    with pytest.raises(RegistryError) as caught:
        status_by_name(name, uri)
    message = str(caught.value)
    assert f"user {user!r} may not read" in message and "HTTP 403" in message
    assert "READ permission" in message and secret not in message and "\n" not in message
