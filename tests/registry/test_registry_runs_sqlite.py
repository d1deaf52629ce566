"""Experiments and runs against a real SQLite store."""

from __future__ import annotations

import pickle
from collections.abc import Callable
from pathlib import Path

import pytest
from mlflow import MlflowClient

from adapterfleet.registry import (
    REDACTED,
    TAG_PARENT_RUN,
    TAG_TRIAL_ID,
    MlflowRunLogger,
    ensure_experiment,
    open_sweep_run,
    open_trial_run,
)
from adapterfleet.training import EpochSink


def test_ensure_experiment_creates_gets_and_restores(
    sqlite_uri: str, sqlite_home: Path, new_name: Callable[[str], str]
) -> None:
    """A deleted experiment is restored with its runs, and said: it was restored without a
    word, undoing an `mlflow experiments delete` its author never heard of."""
    name, said = new_name("exp"), []
    first = ensure_experiment(sqlite_uri, name, say=said.append)
    assert ensure_experiment(sqlite_uri, name, say=said.append) == first
    client = MlflowClient(sqlite_uri)
    experiment = client.get_experiment(first)
    assert experiment.artifact_location == (sqlite_home / "mlartifacts").as_uri()
    for trial in ("a", "b"):
        open_trial_run(sqlite_uri, first, None, trial).end()
    assert said == []
    client.delete_experiment(first)
    assert ensure_experiment(sqlite_uri, name, say=said.append) == first
    assert client.get_experiment(first).lifecycle_stage == "active"
    assert len(client.search_runs([first])) == 2
    assert said == [
        f"experiment {name!r} (id {first}) was in MLflow's trash (deleted, not purged by "
        "mlflow gc): restored it with its 2 runs"
    ]


def test_a_version_whose_experiment_mlflow_gc_purged_is_refused_in_one_line(
    tmp_path: Path, make_adapter: Callable[..., Path]
) -> None:
    """After `mlflow experiments delete` and `mlflow gc`, the registry still lists the versions
    of the purged runs: the pipeline makes the experiment anew, and pulling such a version was
    MLflow's traceback `Run with id=... not found`."""
    import os
    import subprocess
    import sys

    from adapterfleet.registry import RegistryError, default_tracking_uri, pull, register_version

    uri = default_tracking_uri(tmp_path / "store")
    experiment = ensure_experiment(uri, "purged")
    folder = make_adapter(tmp_path / "adapter")
    run = open_trial_run(uri, experiment, None, "t1")
    run.log_artifacts(folder, "adapter")
    run.end()
    weights = folder / "adapter.safetensors"
    version = register_version(uri, "p.adapter.rte", run.run_id, "adapter", weights, {})
    MlflowClient(uri).delete_experiment(experiment)
    mlflow = Path(sys.executable).with_name("mlflow")
    env = {**os.environ, "MLFLOW_TRACKING_URI": uri}
    subprocess.run([str(mlflow), "gc"], env=env, check=True, capture_output=True, timeout=300)

    said: list[str] = []
    assert ensure_experiment(uri, "purged", say=said.append)  # made anew: nothing to restore
    assert said == []
    with pytest.raises(RegistryError) as refused:
        pull(uri, version.name, tmp_path / "pulled")
    assert str(refused.value).startswith(
        f"model p.adapter.rte version 1: its run {run.run_id} is no longer in the tracking store"
    )
    assert "mlflow gc" in str(refused.value) and not (tmp_path / "pulled").exists()


def test_reopening_sweep_and_trial_reuses_their_runs(
    sqlite_uri: str, sqlite_experiment: str, new_name: Callable[[str], str]
) -> None:
    sweep_name, trial_id = new_name("sweep"), new_name("trial")
    sweep = open_sweep_run(sqlite_uri, sqlite_experiment, sweep_name, "rte", {"owner": "ci"})
    sweep.log_new_params({"max_epochs": 2})
    trial = open_trial_run(
        sqlite_uri, sqlite_experiment, sweep.run_id, trial_id, "rf16", {"lr": 0.001}
    )
    trial.log_metrics({"loss": 1.0}, step=0)
    trial.end("FAILED")
    sweep.end("KILLED")

    # A resumed sweep opens both again: same runs, RUNNING again, nothing duplicated.
    sweep2 = open_sweep_run(sqlite_uri, sqlite_experiment, sweep_name, "rte", {"owner": "ci"})
    trial2 = open_trial_run(
        sqlite_uri, sqlite_experiment, sweep2.run_id, trial_id, "rf16", {"lr": 0.001}
    )
    assert sweep2.run_id == sweep.run_id
    assert trial2.run_id == trial.run_id
    sweep2.log_new_params({"max_epochs": 10, "metric": "accuracy"})  # MLflow refuses a change

    client = MlflowClient(sqlite_uri)
    runs = client.search_runs(
        [sqlite_experiment], filter_string=f"tags.`{TAG_TRIAL_ID}` = '{trial_id}'"
    )
    assert [r.info.run_id for r in runs] == [trial.run_id]
    run = client.get_run(trial.run_id)
    assert run.info.status == "RUNNING"
    swept = client.get_run(sweep.run_id)
    assert swept.info.status == "RUNNING" and swept.info.run_name == "sweep rte"
    assert swept.data.params == {"max_epochs": "2", "metric": "accuracy"}  # kept, added
    assert run.data.tags[TAG_PARENT_RUN] == sweep.run_id
    assert run.info.run_name == "rf16"
    assert run.data.params == {"lr": "0.001"}
    children = client.search_runs(
        [sqlite_experiment], filter_string=f"tags.`{TAG_PARENT_RUN}` = '{sweep.run_id}'"
    )
    assert [r.info.run_id for r in children] == [trial.run_id]


def test_same_trial_id_under_another_parent_is_another_run(
    sqlite_uri: str, sqlite_experiment: str, new_name: Callable[[str], str]
) -> None:
    trial_id = new_name("trial")
    a = open_sweep_run(sqlite_uri, sqlite_experiment, new_name("sweep"), "rte")
    b = open_sweep_run(sqlite_uri, sqlite_experiment, new_name("sweep"), "mrpc")
    assert a.run_id != b.run_id
    ta = open_trial_run(sqlite_uri, sqlite_experiment, a.run_id, trial_id)
    tb = open_trial_run(sqlite_uri, sqlite_experiment, b.run_id, trial_id)
    assert ta.run_id != tb.run_id


def test_params_and_tags_are_redacted(
    sqlite_uri: str, sqlite_experiment: str, new_name: Callable[[str], str]
) -> None:
    run = open_trial_run(
        sqlite_uri,
        sqlite_experiment,
        None,
        new_name("trial"),
        params={"lr": 0.01, "hf_token": "hf_live", "storage": "s3://key:secretval@bucket/x"},
        # every secret has a letter beyond f: the run's name carries random hex
        tags={"api_key": "key-xyz", "base_model": "minilm"},
    )
    run.set_tags({"db_password": "pw", "note": "ok"})
    data = MlflowClient(sqlite_uri).get_run(run.run_id).data
    assert data.params == {"lr": "0.01", "hf_token": REDACTED, "storage": REDACTED}
    assert data.tags["api_key"] == REDACTED and data.tags["db_password"] == REDACTED
    assert data.tags["base_model"] == "minilm" and data.tags["note"] == "ok"
    stored = repr(data.params) + repr(data.tags)
    assert "hf_live" not in stored and "secretval" not in stored and "key-xyz" not in stored


def test_logger_metrics_artifacts_status_and_pickle(
    sqlite_uri: str,
    sqlite_experiment: str,
    tmp_path: Path,
    new_name: Callable[[str], str],
    make_adapter: Callable[..., Path],
) -> None:
    run = open_trial_run(sqlite_uri, sqlite_experiment, None, new_name("trial"))
    assert isinstance(run, EpochSink)  # what every training job logs its epochs to
    run.log_metrics({"loss": 0.9, "acc": 0.5}, step=0)
    run.log_metrics({"loss": 0.4, "acc": None}, step=1)
    folder = make_adapter(tmp_path / "adapter")
    run.log_artifacts(folder, "adapter")
    # A pickled logger (as a Ray worker receives it) logs to the same run.
    clone = pickle.loads(pickle.dumps(run))
    assert clone.run_id == run.run_id
    clone.log_metrics({"loss": 0.2}, step=2)
    with pytest.raises(ValueError):
        run.end("DONE")
    run.end("FAILED")

    client = MlflowClient(sqlite_uri)
    history = client.get_metric_history(run.run_id, "loss")
    assert sorted((m.step, m.value) for m in history) == [(0, 0.9), (1, 0.4), (2, 0.2)]
    assert [(m.step, m.value) for m in client.get_metric_history(run.run_id, "acc")] == [(0, 0.5)]
    listed = sorted(f.path for f in client.list_artifacts(run.run_id, "adapter"))
    assert listed == ["adapter/adapter.safetensors", "adapter/adapter_config.json"]
    assert client.get_run(run.run_id).info.status == "FAILED"


def test_logger_as_context_manager_marks_failure(
    sqlite_uri: str, sqlite_experiment: str, new_name: Callable[[str], str]
) -> None:
    with (
        pytest.raises(RuntimeError),
        open_trial_run(sqlite_uri, sqlite_experiment, None, new_name("trial")) as run,
    ):
        raise RuntimeError("trial crashed")
    assert MlflowClient(sqlite_uri).get_run(run.run_id).info.status == "FAILED"


def test_logged_steps_reads_back_the_steps_of_one_metric(
    sqlite_uri: str, sqlite_experiment: str, new_name: Callable[[str], str]
) -> None:
    run = open_trial_run(sqlite_uri, sqlite_experiment, None, new_name("trial"))
    assert isinstance(run, EpochSink)  # what every training job logs its epochs to
    assert run.logged_steps("train_loss") == set()
    run.log_metrics({"train_loss": 0.9, "dev_accuracy": 0.5}, step=1)
    run.log_metrics({"train_loss": 0.7}, step=2)
    run.log_metrics({"best_epoch": 2.0}, step=2)
    # a logger attached anew (as in a resumed job's process) reads the same store
    again = MlflowRunLogger.attach(sqlite_uri, run.run_id)
    assert again.logged_steps("train_loss") == {1, 2}
    assert again.logged_steps("dev_accuracy") == {1}
    assert again.logged_steps("never_logged") == set()
    run.end("FINISHED")


def test_a_sweep_run_an_interrupt_left_killed_is_finished_once_its_task_is_registered(
    sqlite_uri: str, sqlite_experiment: str, new_name: Callable[[str], str]
) -> None:
    """Ctrl-C between a task's registration and its sweep run's end left the run KILLED, and
    the next run skips the task: the plan ends it FINISHED (`finish_sweep_run`), once."""
    from adapterfleet.registry.sweep_run import finish_sweep_run

    name = new_name("sweep")
    killed = open_sweep_run(sqlite_uri, sqlite_experiment, name, "rte")
    killed.end("KILLED")
    client = MlflowClient(sqlite_uri)
    assert finish_sweep_run(sqlite_uri, sqlite_experiment, name, "rte") is True
    assert client.get_run(killed.run_id).info.status == "FINISHED"
    assert finish_sweep_run(sqlite_uri, sqlite_experiment, name, "rte") is False  # done already
    failed = open_sweep_run(sqlite_uri, sqlite_experiment, name, "mrpc")
    failed.end("FAILED")  # trials that failed for good: not an interrupt's, left as it is
    assert finish_sweep_run(sqlite_uri, sqlite_experiment, name, "mrpc") is False
    assert client.get_run(failed.run_id).info.status == "FAILED"
    assert finish_sweep_run(sqlite_uri, sqlite_experiment, new_name("none"), "rte") is False


def test_a_sweep_run_a_killed_driver_left_without_its_summary_gets_it(
    sqlite_uri: str, sqlite_experiment: str, new_name: Callable[[str], str]
) -> None:
    """A driver killed (SIGKILL) right after a registration left its task's sweep run with no
    best metric, best trial or registered version, RUNNING or FINISHED, and the next run
    skipped the task: the plan fills the summary in and ends the run, once."""
    from adapterfleet.registry.sweep_run import finish_sweep_run

    name = new_name("sweep")
    summary = ({"best_dev_accuracy": 0.75}, {"best_trial": "rte-rf16", "registered_version": "3"})
    client = MlflowClient(sqlite_uri)
    left = open_sweep_run(sqlite_uri, sqlite_experiment, name, "rte")  # RUNNING: killed
    assert finish_sweep_run(sqlite_uri, sqlite_experiment, name, "rte", lambda: summary)
    run = client.get_run(left.run_id)
    assert run.info.status == "FINISHED" and run.data.metrics == {"best_dev_accuracy": 0.75}
    assert run.data.tags["registered_version"] == "3" and run.data.tags["best_trial"] == "rte-rf16"
    assert not finish_sweep_run(sqlite_uri, sqlite_experiment, name, "rte", lambda: summary)
    ended = open_sweep_run(sqlite_uri, sqlite_experiment, name, "mrpc")
    ended.end("FINISHED")  # ended, killed before its summary (the order before this change)
    assert finish_sweep_run(sqlite_uri, sqlite_experiment, name, "mrpc", lambda: summary)
    assert client.get_run(ended.run_id).data.tags["registered_version"] == "3"


def test_every_run_says_the_versions_and_commit_it_was_made_with(
    sqlite_uri: str, sqlite_experiment: str, new_name: Callable[[str], str]
) -> None:
    """A reader of a run found no version of adapterfleet, torch, transformers, Ray or MLflow
    and no commit in MLflow: nothing said what to install to rerun it."""
    import subprocess
    from importlib import metadata

    from adapterfleet.registry.environment import TAG_GIT_COMMIT, TAG_VERSIONS

    sweep = open_sweep_run(sqlite_uri, sqlite_experiment, new_name("sweep"), "rte", {"a": "b"})
    trial = open_trial_run(sqlite_uri, sqlite_experiment, sweep.run_id, new_name("t"), "rf16", {})
    for logger in (sweep, trial):
        tags = MlflowClient(sqlite_uri).get_run(logger.run_id).data.tags
        versions = tags[TAG_VERSIONS].split(", ")
        assert versions[:2] == [
            f"adapterfleet {metadata.version('adapterfleet')}",
            f"torch {metadata.version('torch')}",
        ]
        assert f"mlflow {metadata.version('mlflow')}" in versions and versions[-1][:7] == "python "
        assert tags["mlflow.source.name"] == "adapterfleet"  # the UI's Source, with the commit
        root = Path(__file__).resolve().parents[2]
        if (root / ".git").exists():  # a checkout: its commit, as MLflow's UI shows it
            head = subprocess.run(
                ["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True
            )
            assert tags[TAG_GIT_COMMIT] == head.stdout.strip()


def test_a_run_says_who_created_it_and_keeps_its_creator_when_reopened(
    sqlite_uri: str,
    sqlite_experiment: str,
    new_name: Callable[[str], str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Runs made with `MlflowClient.create_run` had no `mlflow.user`: `user_id` 'unknown', the
    UI's "Created by -", and no search by user found them. They carry the user MLflow's own
    `start_run` would record, and a run reopened by someone else keeps its creator."""
    import getpass

    monkeypatch.delenv("MLFLOW_TRACKING_USERNAME", raising=False)
    monkeypatch.setenv("HOME", str(Path(sqlite_uri.removeprefix("sqlite:///")).parent))
    login = getpass.getuser()
    trial_id = new_name("trial")
    first = open_trial_run(sqlite_uri, sqlite_experiment, None, trial_id)
    first.end("KILLED")
    client = MlflowClient(sqlite_uri)
    run = client.get_run(first.run_id)
    assert run.data.tags["mlflow.user"] == login and run.info.user_id == login
    found = client.search_runs(
        [sqlite_experiment],
        filter_string=f"tags.`mlflow.user` = '{login}' AND tags.`{TAG_TRIAL_ID}` = '{trial_id}'",
    )
    assert [r.info.run_id for r in found] == [first.run_id]

    monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", "colleague")  # MLflow's login comes first
    again = open_trial_run(sqlite_uri, sqlite_experiment, None, trial_id)  # resumed by another
    assert again.run_id == first.run_id
    kept = client.get_run(first.run_id)
    assert kept.data.tags["mlflow.user"] == login and kept.info.user_id == login
    other = open_trial_run(sqlite_uri, sqlite_experiment, None, new_name("trial"))
    assert client.get_run(other.run_id).info.user_id == "colleague"
    monkeypatch.setenv("ADAPTERFLEET_USER", "ada")  # a submitted job's: who submitted it
    submitted = open_trial_run(sqlite_uri, sqlite_experiment, None, new_name("trial"))
    assert client.get_run(submitted.run_id).info.user_id == "ada"


def test_a_fusion_run_named_before_its_seed_was_in_the_name_is_found_again(
    sqlite_uri: str, sqlite_experiment: str, new_name: Callable[[str], str]
) -> None:
    """Fusion runs are found by their id's tag, not by name: one made when every fusion run of
    a target was `fusion-<target>` is reopened, and keeps its name."""
    from adapterfleet.registry import open_fusion_run

    fusion_id = new_name("fusion-rte")
    old = open_fusion_run(sqlite_uri, sqlite_experiment, "rte", fusion_id, run_name="fusion-rte")
    old.end("KILLED")
    again = open_fusion_run(
        sqlite_uri, sqlite_experiment, "rte", fusion_id, run_name=f"{fusion_id}-s1"
    )
    assert again.run_id == old.run_id
    assert MlflowClient(sqlite_uri).get_run(old.run_id).info.run_name == "fusion-rte"
    other = open_fusion_run(sqlite_uri, sqlite_experiment, "rte", new_name("fusion-rte"))
    assert MlflowClient(sqlite_uri).get_run(other.run_id).info.run_name.startswith("fusion-rte-")
