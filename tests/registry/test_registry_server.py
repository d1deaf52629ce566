"""The same registry operations over HTTP against a real `mlflow server` process."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from mlflow import MlflowClient

from adapterfleet.registry import (
    TAG_TRIAL_ID,
    MlflowRunLogger,
    RegistryError,
    adapter_model_name,
    check_tracking_uri,
    ensure_experiment,
    get_version,
    list_models,
    open_sweep_run,
    open_trial_run,
    pull,
    register_version,
    wait_for_models,
)
from adapterfleet.registry.environment import run_user

pytestmark = pytest.mark.integration


def test_ending_runs_on_a_server_prints_no_links_between_our_lines(
    mlflow_server: str,
    new_name: Callable[[str], str],
    capfd: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """MLflow writes `🏃 View run ... at:` and `🧪 View experiment at:` to stdout as a run ends
    against a server: a pair per trial and task in the pipeline's console (SQLite runs had none)."""
    monkeypatch.delenv("MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT", raising=False)
    experiment = ensure_experiment(mlflow_server, new_name("links"))
    sweep = open_sweep_run(mlflow_server, experiment, "sweep-links", "rte")
    trial = open_trial_run(mlflow_server, experiment, sweep.run_id, "t_1", "rf16", {"lr": 0.1})
    trial.end()
    sweep.end()
    assert "View run" not in capfd.readouterr().out
    monkeypatch.setenv("MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT", "false")  # the user's choice
    asked = open_trial_run(mlflow_server, experiment, sweep.run_id, "t_2", "rf16", {"lr": 0.1})
    asked.end()
    assert "View run" in capfd.readouterr().out


def test_runs_register_pull_and_idempotency_over_http(
    mlflow_server: str,
    tmp_path: Path,
    make_adapter: Callable[..., Path],
    new_name: Callable[[str], str],
    capfd: pytest.CaptureFixture[str],
) -> None:
    uri = mlflow_server
    check_tracking_uri(uri)
    experiment = ensure_experiment(uri, new_name("http"))
    assert ensure_experiment(uri, new_name("http")) != experiment

    sweep = open_sweep_run(uri, experiment, "sweep-rte", "rte")
    trial = open_trial_run(uri, experiment, sweep.run_id, "t_00000", "rf16", {"lr": 0.001})
    again = open_trial_run(uri, experiment, sweep.run_id, "t_00000", "rf16", {"lr": 0.001})
    assert again.run_id == trial.run_id
    assert open_sweep_run(uri, experiment, "sweep-rte", "rte").run_id == sweep.run_id
    folder = make_adapter(tmp_path / "adapter", seed=5)
    trial.log_metrics({"eval_accuracy": 0.7}, step=0)
    trial.log_artifacts(folder, "adapter")
    trial.end()

    prefix = new_name("srv")
    name = adapter_model_name(prefix, "rte")
    weights = folder / "adapter.safetensors"
    tags = {TAG_TRIAL_ID: "t_00000", "metric_value": "0.7"}
    capfd.readouterr()
    first = register_version(uri, name, trial.run_id, "adapter", weights, tags)
    second = register_version(uri, name, trial.run_id, "adapter", weights, tags)
    assert first == second and first.version == 1 and first.aliases == ("best",)
    said = capfd.readouterr()  # MLflow's INFO line came between prune's own lines
    assert "Waiting up to" not in said.out + said.err, said
    client = MlflowClient(uri, registry_uri=uri)
    assert len(client.search_model_versions(f"name = '{name}'")) == 1
    assert len(client.search_runs([experiment])) == 2  # one sweep run, one trial run
    assert client.get_run(trial.run_id).info.user_id == run_user()  # the UI's "Created by"

    got = pull(uri, name, tmp_path / "pulled")
    assert (got / "adapter.safetensors").read_bytes() == weights.read_bytes()
    assert get_version(uri, name, alias="best") == first
    assert [m.name for m in list_models(uri, prefix)] == [name]
    assert wait_for_models(uri, [name], timeout_s=5, poll_s=0.1)[name] == first


def test_a_servers_database_as_the_uri_is_refused_at_once_on_a_pull(
    mlflow_server: str,
    mlflow_server_db: Path,
    tmp_path: Path,
    make_adapter: Callable[..., Path],
    new_name: Callable[[str], str],
) -> None:
    """A team member gave the server's database (sqlite:///.../mlflow.db) as the URI: `status`
    read it, `pull` then tried 17 times over 120 s and blamed the server; its artifacts are
    `mlflow-artifacts:/` files only the server's address reaches."""
    experiment = ensure_experiment(mlflow_server, new_name("db"))
    trial = open_trial_run(mlflow_server, experiment, None, "t_db", "rf16", {"lr": 0.001})
    folder = make_adapter(tmp_path / "adapter", seed=6)
    trial.log_artifacts(folder, "adapter")
    trial.end()
    name = adapter_model_name(new_name("db"), "rte")
    register_version(mlflow_server, name, trial.run_id, "adapter", folder / "adapter.safetensors")
    database = f"sqlite:///{mlflow_server_db}"
    assert get_version(database, name, alias="best") is not None  # reading the registry works
    with pytest.raises(RegistryError) as error:
        pull(database, name, tmp_path / "pulled")
    message = str(error.value)  # at the first attempt, with the fix: not `failed after 17 ...`
    assert "attempts" not in message, message
    assert "artifacts are kept by an MLflow server (mlflow-artifacts:/ URIs)" in message
    assert message.endswith("not the database it writes to"), message


def test_log_metrics_survives_a_brief_outage(
    mlflow_server: str,
    tcp_proxy: Callable[[int], Any],
    monkeypatch: pytest.MonkeyPatch,
    new_name: Callable[[str], str],
) -> None:
    # MLflow's own HTTP retries off: what is retried here is adapterfleet's loop.
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    proxy = tcp_proxy(int(urlsplit(mlflow_server).port or 0))
    proxy.start()
    uri = f"http://127.0.0.1:{proxy.port}"
    experiment = ensure_experiment(uri, new_name("outage"))
    run = open_trial_run(uri, experiment, None, "t_outage", retry_timeout_s=30)
    run.log_metrics({"loss": 1.0}, step=0)

    proxy.stop()
    restart = threading.Timer(1.5, proxy.start)
    restart.start()
    start = time.monotonic()
    try:
        run.log_metrics({"loss": 0.5}, step=1)
    finally:
        restart.join()
    assert time.monotonic() - start >= 1.0
    history = MlflowClient(mlflow_server).get_metric_history(run.run_id, "loss")
    assert sorted((m.step, m.value) for m in history) == [(0, 1.0), (1, 0.5)]


def test_retry_is_bounded_when_the_server_stays_down(monkeypatch: pytest.MonkeyPatch) -> None:
    import socket

    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    logger = MlflowRunLogger.attach(f"http://127.0.0.1:{port}", "0" * 32, retry_timeout_s=1.0)
    start = time.monotonic()
    with pytest.raises(RegistryError, match="log metrics"):
        logger.log_metrics({"loss": 1.0}, step=0)
    assert 1.0 <= time.monotonic() - start < 5


def test_dataset_inputs_reach_a_server_once(mlflow_server: str, new_name: Callable[[str], str]):
    """A run's train and dev data as MLflow dataset inputs, over HTTP; a reopened run logs
    them again and the server holds each once."""
    import json

    from adapterfleet.registry.datasets import EVAL, TRAIN, DatasetRecord, log_dataset_inputs

    experiment = ensure_experiment(mlflow_server, new_name("inputs"))
    records = [
        DatasetRecord("rte-train", "0123456789abcdef", "local", '{"uri": "/d/train.tsv"}',
                      TRAIN, {"num_rows": 200}),
        DatasetRecord("rte-dev", "fedcba9876543210", "local", '{"uri": "/d/dev.tsv"}',
                      EVAL, {"num_rows": 50}),
    ]  # fmt: skip
    said: list[str] = []
    for _ in range(2):
        run = open_trial_run(mlflow_server, experiment, None, "t_inputs")
        log_dataset_inputs(run, records, said.append)
    inputs = MlflowClient(mlflow_server).get_run(run.run_id).inputs.dataset_inputs
    found = {i.dataset.name: (i.tags[0].value, json.loads(i.dataset.profile)) for i in inputs}
    assert found == {
        "rte-train": ("train", {"num_rows": 200}),
        "rte-dev": ("eval", {"num_rows": 50}),
    }
    assert said == []
