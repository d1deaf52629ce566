"""`clean`'s judgement on a real SQLite tracking store and real folders: a sweep is scratch only
when MLflow holds all its runs FINISHED; an unfinished one, another pipeline's folder and
everything while a driver runs are kept. The whole command on a real pipeline's storage is in
tests/pipeline/test_pipeline_clean.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from tuning_support import PIPELINE, config_document, mlflow_client, write_config

from adapterfleet.config import ConfigError, load_config
from adapterfleet.orchestration.clean import clean_storage, plan_clean
from adapterfleet.registry.heartbeat import heartbeat
from adapterfleet.registry.tags import TAG_KIND, TAG_SWEEP, TAG_TASK

FINISHED = f"{PIPELINE}-0123abcd-20261201T100000"
STOPPED = f"{PIPELINE}-4567cdef-20261201T110000"
OTHER = f"{PIPELINE}-2-0123abcd-20261201T100000"  # pipeline "tinysweep-2", same storage


def _sweep_runs(uri: str, experiment_id: str, sweep: str, statuses: dict[str, str]) -> None:
    client = mlflow_client(uri)
    for task, status in statuses.items():
        tags = {TAG_KIND: "sweep", TAG_SWEEP: sweep, TAG_TASK: task}
        run = client.create_run(experiment_id, tags=tags, run_name=f"{sweep}-{task}")
        client.set_terminated(run.info.run_id, status)


def _tune_folder(folder: Path, sweep: str) -> Path:
    folder.mkdir(parents=True)
    meta = {"sweep_name": sweep, "sweep_hash": "0" * 64, "tasks": ["fruit", "water"]}
    (folder / "adapterfleet_sweep.json").write_text(json.dumps(meta))
    (folder / "experiment_state.json").write_bytes(b"x" * 3000)
    return folder


@pytest.fixture
def storage_world(tmp_path: Path, tiny_model: Path):
    """A pipeline's storage: a finished sweep set aside, an interrupted one in place, another
    pipeline's sweep folder; their sweep runs in a real SQLite store."""
    document = config_document(tmp_path, tiny_model)
    document["tracking_uri"] = f"sqlite:///{tmp_path}/mlflow.db"
    path = write_config(tmp_path, document)
    config = load_config(path)
    uri = config.tracking_uri
    experiment_id = mlflow_client(uri).create_experiment(PIPELINE)
    _sweep_runs(uri, experiment_id, FINISHED, {"fruit": "FINISHED", "water": "FINISHED"})
    _sweep_runs(uri, experiment_id, STOPPED, {"fruit": "FINISHED", "water": "KILLED"})
    storage = Path(config.storage).resolve()
    _tune_folder(storage / "ray" / "previous" / FINISHED, FINISHED)
    _tune_folder(storage / "ray" / PIPELINE, STOPPED)
    for sweep in (FINISHED, STOPPED, OTHER):
        (storage / "sweeps" / sweep / "fruit-rf4").mkdir(parents=True)
        (storage / "sweeps" / sweep / "fruit-rf4" / "adapter.safetensors").write_bytes(b"w" * 500)
    for sweep in (FINISHED, STOPPED):  # trials of several workers: Ray Train's runs
        checkpoint = storage / "ray" / "train" / sweep / "fruit-rf4" / "checkpoint_000000"
        checkpoint.mkdir(parents=True)
        (checkpoint / "checkpoint.pt").write_bytes(b"c" * 700)
    return path, config, storage, experiment_id


def test_only_sweeps_mlflow_holds_finished_are_scratch(storage_world) -> None:
    _, config, storage, _ = storage_world
    plan = plan_clean(config)
    assert [item.path.relative_to(storage) for item in plan.scratch] == [
        Path("ray/previous") / FINISHED,  # Tune's state first: a crash never leaves it alone
        Path("sweeps") / FINISHED,
        Path("ray/train") / FINISHED,  # they stayed for good: 8 MB for two tiny trials
    ]
    meta = (storage / "ray" / "previous" / FINISHED / "adapterfleet_sweep.json").stat().st_size
    assert [item.size for item in plan.scratch] == [3000 + meta, 500, 700]
    assert plan.scratch[-1].why == (
        f"Ray Train's runs of the trials of sweep {FINISHED}, finished (its adapters are "
        "registered)"
    )
    assert plan.kept == (f"sweep {STOPPED}: not finished (KILLED); the same command resumes it",)

    said: list[str] = []
    clean_storage(config, dry_run=True, say=said.append)
    assert all(item.path.is_dir() for item in plan.scratch)  # a dry run removes nothing
    assert said[-1] == f"clean {PIPELINE}: would free 0.0 MB of {storage}; run it without --dry-run"

    said.clear()
    (storage / ".cleaning-abc" / "half").mkdir(parents=True)  # left by a clean cut short
    clean_storage(config, say=said.append)
    assert not (storage / "ray" / "previous" / FINISHED).exists()
    assert not (storage / "sweeps" / FINISHED).exists()
    assert not (storage / "ray" / "train" / FINISHED).exists()
    assert not list(storage.glob(".cleaning-*"))
    for kept in (
        storage / "ray" / PIPELINE,
        storage / "sweeps" / STOPPED,
        storage / "sweeps" / OTHER,
        storage / "ray" / "train" / STOPPED,
    ):
        assert kept.is_dir(), kept
    assert said[0] == "removed .cleaning-abc (0.0 MB): left by an interrupted clean"
    assert said[1].startswith(f"removed ray/previous/{FINISHED} (0.0 MB): Tune's experiment of ")
    assert said[-2] == f"kept sweep {STOPPED}: not finished (KILLED); the same command resumes it"
    assert said[-1] == f"clean {PIPELINE}: freed 0.0 MB of {storage}"
    assert plan_clean(config).scratch == ()  # nothing more to do


def test_an_interrupted_sweep_whose_tasks_were_registered_since_is_scratch(storage_world) -> None:
    """A sweep stopped by Ctrl-C whose tasks another sweep registered since for its settings:
    the same command skips every task (nothing resumes it), yet clean kept its 40 MB for good
    as `not finished (KILLED); the same command resumes it`. A version of other settings does
    not make it scratch."""
    from adapterfleet.registry import adapter_model_name, register_version
    from adapterfleet.registry.tags import TAG_CONFIG_HASH

    _, config, storage, experiment_id = storage_world
    uri, client = config.tracking_uri, mlflow_client(config.tracking_uri)
    moot = f"{PIPELINE}-89abcdef-20261201T120000"
    for task in ("fruit", "water"):
        tags = {TAG_KIND: "sweep", TAG_SWEEP: moot, TAG_TASK: task, TAG_CONFIG_HASH: f"h-{task}"}
        client.set_terminated(client.create_run(experiment_id, tags=tags).info.run_id, "KILLED")
    (storage / "sweeps" / moot / "fruit-rf4").mkdir(parents=True)
    weights = storage.parent / "w" / "adapter.safetensors"
    weights.parent.mkdir()
    weights.write_bytes(b"w")
    for task, digest in (("fruit", "h-fruit"), ("water", "h-other")):
        run = client.create_run(experiment_id, tags={TAG_KIND: "trial", TAG_TASK: task})
        client.log_artifacts(run.info.run_id, str(weights.parent), "adapter")
        name = adapter_model_name(config.registry_prefix, task)
        register_version(uri, name, run.info.run_id, "adapter", weights, {TAG_CONFIG_HASH: digest})
    assert Path("sweeps") / moot not in [
        i.path.relative_to(storage) for i in plan_clean(config).scratch
    ]
    run = client.create_run(experiment_id, tags={TAG_KIND: "trial", TAG_TASK: "water"})
    client.log_artifacts(run.info.run_id, str(weights.parent), "adapter")
    name = adapter_model_name(config.registry_prefix, "water")
    register_version(uri, name, run.info.run_id, "adapter", weights, {TAG_CONFIG_HASH: "h-water"})
    plan = plan_clean(config)
    assert Path("sweeps") / moot in [item.path.relative_to(storage) for item in plan.scratch]
    assert not any(moot in line for line in plan.kept), plan.kept


def test_a_running_driver_or_a_missing_storage_is_refused(storage_world, tmp_path: Path) -> None:
    path, config, storage, experiment_id = storage_world
    command = [sys.executable, "-m", "adapterfleet.cli.app", "clean", str(path)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    with heartbeat(config.tracking_uri, experiment_id, sweep=True):  # this process: the driver
        refused = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)
    assert refused.returncode != 0
    assert (
        f"clean {PIPELINE}: a driver runs this pipeline's sweep (process {os.getpid()} on "
    ) in refused.stderr, refused.stderr
    assert "run clean once it has ended, or stop it (Ctrl-C in its terminal)" in refused.stderr
    assert (storage / "sweeps" / FINISHED).is_dir()  # nothing was removed

    # the driver has ended: the same command goes ahead
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert not (storage / "sweeps" / FINISHED).exists()

    elsewhere = load_config(path, [f"storage={tmp_path / 'nowhere'}"])
    with pytest.raises(ConfigError, match="nowhere is not a folder on this machine"):
        clean_storage(elsewhere, say=print)


def test_the_copies_a_prune_pulled_are_scratch_not_its_report_nor_while_it_runs(
    storage_world,
) -> None:
    """`clean` left `prune/` whole (36 MB of pulled copies after a user's prunes) and said it
    would free 0.0 MB, where the README calls the folder safe to delete."""
    from adapterfleet._locks import sole_lock

    _, config, storage, _ = storage_world
    source = storage / "prune" / "fruit" / "v1"
    for part in ("v1", "v2", "report"):
        (source / part).mkdir(parents=True)
        (source / part / "fusion.safetensors").write_bytes(b"f" * 700)
    with sole_lock(storage / "prune" / "fruit" / ".prune.lock", "4242"):  # a prune runs
        plan = plan_clean(config)
    assert not any(item.path.is_relative_to(storage / "prune") for item in plan.scratch)
    assert "prune/fruit: a prune of fruit runs now" in plan.kept
    said: list[str] = []
    clean_storage(config, say=said.append)
    assert not (source / "v1").exists() and not (source / "v2").exists()
    assert (source / "report" / "fusion.safetensors").is_file()  # its report stays
    pulled = "removed prune/fruit/v1/v2 (0.0 MB): the copy of fusion fruit v2 a prune pulled"
    assert f"{pulled} (pulled again)" in said, said
