"""The direct read-only SQLite queries behind `status` and `list_models` give what MLflow's own
client gives on the same store (runs, tags, latest metrics incl. NaN, deleted runs and versions,
aliases, a `_` in the prefix), and a store they cannot read falls back to the client."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from mlflow import MlflowClient

from adapterfleet.registry import experiment_runs, list_models, sqlite_read
from adapterfleet.registry.status import _search_all, best_logged
from adapterfleet.registry.store import get_client

EXPERIMENT = "read_test"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> str:
    """Runs and registered models written by the real MLflow client into a fresh SQLite file."""
    folder = tmp_path_factory.mktemp("sqlite-read")
    uri = f"sqlite:///{folder / 'mlflow.db'}"
    client = MlflowClient(uri, registry_uri=uri)
    experiment = client.create_experiment(EXPERIMENT, artifact_location=(folder / "a").as_uri())
    client.create_experiment("other")
    for index, (kind, status) in enumerate(
        [("sweep", "RUNNING"), ("trial", "FINISHED"), ("trial", "FAILED"), ("fusion", "KILLED")]
    ):
        tags = {"adapterfleet.kind": kind, "adapterfleet.task": f"t{index % 2}", "noise": "x"}
        if kind == "trial":
            tags["adapterfleet.trial_id"] = f"trial-{index}"
        run = client.create_run(experiment, tags=tags, start_time=1000 + index)
        client.log_metric(run.info.run_id, "dev_accuracy", 0.5 + index / 10, step=0)
        client.log_metric(run.info.run_id, "dev_accuracy", 0.6 + index / 10, step=1)
        client.log_metric(run.info.run_id, "loss", math.nan)
        if status != "RUNNING":
            client.set_terminated(run.info.run_id, status)
    gone = client.create_run(experiment, tags={"adapterfleet.kind": "trial"})
    client.delete_run(gone.info.run_id)
    for name in ("p_x.adapter.rte", "p_x.adapter.mrpc", "pyx.adapter.rte", "p_x.fusion.rte"):
        client.create_registered_model(name)
        for version in (1, 2, 3):
            client.create_model_version(
                name, f"runs:/r{version}/adapter", tags={"sha256": f"h{version}", "k": name}
            )
    client.set_registered_model_alias("p_x.adapter.rte", "best", "2")
    client.set_registered_model_alias("p_x.adapter.rte", "pruned-1", "2")
    client.set_registered_model_alias("p_x.adapter.mrpc", "old", "1")
    client.delete_model_version("p_x.adapter.mrpc", "3")
    return uri


def _by_mlflow(uri: str, monkeypatch: pytest.MonkeyPatch):  # noqa: ANN202
    """The same calls with the direct queries unavailable: MLflow's client answers."""

    def unreadable(db: Path) -> None:
        raise sqlite_read.Unreadable("test: take the MLflow path")

    monkeypatch.setattr(sqlite_read, "_connect", unreadable)
    runs = experiment_runs(uri, EXPERIMENT)
    models = {k: list_models(uri, "p_x", k) for k in ("adapter", "fusion")}
    monkeypatch.undo()
    return runs, models


def test_runs_and_models_equal_what_mlflow_reads(store: str, monkeypatch: pytest.MonkeyPatch):
    runs = experiment_runs(store, EXPERIMENT)
    models = {k: list_models(store, "p_x", k) for k in ("adapter", "fusion")}
    slow_runs, slow_models = _by_mlflow(store, monkeypatch)

    assert [r.run_id for r in runs] == [r.run_id for r in slow_runs]
    assert len(runs) == 4  # the deleted run is not there
    for fast, slow in zip(runs, slow_runs, strict=True):
        assert (fast.status, fast.start_time) == (slow.status, slow.start_time)
        assert fast.tags == slow.tags
        assert fast.metrics["dev_accuracy"] == slow.metrics["dev_accuracy"]
        assert math.isnan(fast.metrics["loss"]) and math.isnan(slow.metrics["loss"])
    assert runs[1].kind == "trial" and runs[0].kind == "sweep" and "noise" not in runs[0].tags
    assert runs[1].metrics["dev_accuracy"] == pytest.approx(0.7)  # the latest step

    assert models == slow_models
    adapters = {info.name: info for info in models["adapter"]}
    assert sorted(adapters) == ["p_x.adapter.mrpc", "p_x.adapter.rte"]  # not pyx.* ('_' is literal)
    rte = adapters["p_x.adapter.rte"]
    assert (rte.version, rte.aliases, rte.tags["sha256"]) == (2, ("best", "pruned-1"), "h2")
    assert rte.source == "runs:/r2/adapter" and rte.created_ms > 0
    assert adapters["p_x.adapter.mrpc"].version == 2  # no best: the latest live version


def test_absent_experiment_and_store(store: str, tmp_path: Path):
    assert experiment_runs(store, "no-such-pipeline") is None
    assert experiment_runs(f"sqlite:///{tmp_path / 'none.db'}", EXPERIMENT) is None
    assert not (tmp_path / "none.db").exists()  # reading created nothing


def test_the_mlflow_reader_is_what_status_used_before(store: str):
    client = get_client(store)
    experiment = client.get_experiment_by_name(EXPERIMENT).experiment_id
    assert [r.run_id for r in _search_all(client, experiment)] == [
        r.run_id for r in experiment_runs(store, EXPERIMENT)
    ]


def test_best_logged_equals_what_mlflow_reads(store: str, monkeypatch: pytest.MonkeyPatch):
    """The best of a metric's history per run (what `status` shows for a running trial): the
    highest or the lowest, NaN left out, a run without the metric left out."""
    runs = experiment_runs(store, EXPERIMENT)
    client = MlflowClient(store)
    ids = [r.run_id for r in runs]
    client.log_metric(ids[0], "dev_mse", 0.5, step=0)
    client.log_metric(ids[0], "dev_mse", 0.2, step=1)
    client.log_metric(ids[0], "dev_mse", math.nan, step=2)
    client.log_metric(ids[0], "dev_mse", 0.3, step=3)
    client.log_metric(ids[1], "dev_mse", math.nan, step=0)
    for i, run in enumerate(ids):  # the best before the latest step
        client.log_metric(run, "dev_f1", 0.5 + i / 10, step=0)
        client.log_metric(run, "dev_f1", 0.1, step=1)

    lowest = best_logged(store, ids, "dev_mse", highest=False)
    highest = best_logged(store, ids, "dev_f1", highest=True)
    assert lowest == {ids[0]: pytest.approx(0.2)}  # ids[1] logged only NaN, the rest nothing
    assert best_logged(store, ids, "dev_mse", highest=True) == {ids[0]: pytest.approx(0.5)}
    assert highest == {run: pytest.approx(0.5 + i / 10) for i, run in enumerate(ids)}
    assert best_logged(store, [], "dev_mse", highest=False) == {}

    def unreadable(db: Path) -> None:
        raise sqlite_read.Unreadable("test: take the MLflow path")

    monkeypatch.setattr(sqlite_read, "_connect", unreadable)
    assert best_logged(store, ids, "dev_mse", highest=False) == lowest
    assert best_logged(store, ids, "dev_f1", highest=True) == highest
