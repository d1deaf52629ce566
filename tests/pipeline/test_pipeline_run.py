"""`adapterfleet run` end to end on a real local Ray and a real MLflow store, with a tiny model:
adapters swept and registered, the fusion gated by the registry, nothing redone on a re-run."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest
from tuning_support import (
    config_document,
    metric_steps,
    mlflow_client,
    runs_of,
    version_numbers,
    write_config,
)
from typer.testing import CliRunner

from adapterfleet.cli.app import app
from adapterfleet.config import load_config
from adapterfleet.orchestration.pipeline import _early_target, run_pipeline
from adapterfleet.orchestration.summary import summary_rows
from adapterfleet.registry.descriptions import COMMAND_ENV, TAG_NOTE

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]


def _config(tmp_path: Path, model: Path, adapters=None, **fusion):
    document = config_document(tmp_path, model, **(adapters or {}))
    document["fusion"] = {
        "targets": {"fruit": "all"},
        "training": {"max_epochs": 2, "batch_size": 16, "learning_rate": 0.01, "device": "cpu"},
        **fusion,
    }
    return write_config(tmp_path, document)


def _epochs(output: str, label: str) -> list[int]:
    """The epochs of the lines `LABEL epoch K/N: ...` in `output`, in order."""
    pattern = rf"^{re.escape(label)} epoch (\d+)/\d+: train loss \d\.\d{{4}}, dev accuracy "
    return [int(m.group(1)) for m in re.finditer(pattern, output, re.M)]


def check_console(output: str, uri: str) -> None:
    """The pipeline's own lines only: one per epoch of every trial and of the fusion (as many
    as MLflow holds), the trial counts on each, nothing of Ray's, Tune's or MLflow's own, no
    colour codes; the fusion's registration the last line."""
    assert "\x1b[" not in output
    noise = ("Checkpoint successfully", " INFO ", "Configuration for", "tensorboard", "pid=")
    for text in (*noise, "[adapterfleet]"):  # Ray's, Tune's, MLflow's; our relay's mark
        assert text not in output, text
    epochs = 0
    for run in runs_of(uri, "trial"):
        steps = metric_steps(uri, run.info.run_id, "train_loss")
        assert _epochs(output, f"trial {run.data.tags['adapterfleet.trial_id']}") == steps != []
        epochs += len(steps)
    counts = r"\[trials \d done, \d running, \d pending; fusions 1 waiting\]$"
    assert len(re.findall(counts, output, re.M)) == epochs
    (fusion,) = runs_of(uri, "fusion")
    label = f"fusion fruit ({fusion.data.tags['adapterfleet.trial_id']})"
    assert _epochs(output, label) == metric_steps(uri, fusion.info.run_id, "train_loss") == [1, 2]
    lines = output.strip().splitlines()
    registered = r"fusion fruit: registered tinysweep\.fusion\.fruit v1 \(accuracy \d\.\d{4}\)"
    assert re.fullmatch(registered, lines[-1]), lines[-1]


def test_run_registers_adapters_then_the_fusion_and_a_rerun_redoes_nothing(
    tmp_path, tiny_model, ray_local, monkeypatch, capfd
):
    monkeypatch.setenv(COMMAND_ENV, "adapterfleet run -c pipeline.yaml")
    water = {"task_training": {"water": {"max_epochs": 3}}}
    path = _config(tmp_path, tiny_model, water)
    config = load_config(path)
    summary = run_pipeline(config, say=print)
    uri = config.tracking_uri
    output = capfd.readouterr()
    check_console(output.out + output.err, uri)
    _check_what_the_ui_shows(uri, summary)
    assert sorted(summary.adapters) == ["fruit", "water"] and not summary.errors
    fusion = summary.fusions["fruit"]
    assert fusion.trained and 0.0 <= fusion.dev_metrics["accuracy"] <= 1.0
    tags = fusion.version.tags
    adapters = summary.adapters
    assert tags["adapter.fruit"] == f"v{adapters['fruit'].version}"
    assert tags["adapter.water"] == f"v{adapters['water'].version}"
    assert tags["sha256"] and tags["adapterfleet.lineage"].startswith("fruit:v")
    # the registry is the gate: the fusion's run starts after the last adapter registration
    client = mlflow_client(uri)
    fusion_run = client.get_run(fusion.version.run_id)
    assert fusion_run.data.tags["adapterfleet.max_length"] == str(config.max_length)  # its rows
    assert fusion_run.data.tags["adapterfleet.torch_threads"] == str(int(config.resources.cpu))
    last_adapter = max(info.created_ms for info in adapters.values())
    assert fusion_run.info.start_time >= last_adapter
    assert fusion.start_delay < 60
    # started warm with the pipeline: the first step is logged, after the training code started
    delays = fusion_run.data.metrics
    assert 0.0 <= delays["training_start_delay_s"] <= delays["first_step_delay_s"]
    artifacts = {a.path for a in client.list_artifacts(fusion.version.run_id)}
    assert {"fusion", "head", "fusion_weights.png", "fusion_weights.json", "run.json"} <= artifacts
    weights = json.loads(
        Path(
            client.download_artifacts(fusion.version.run_id, "fusion_weights.json", str(tmp_path))
        ).read_text()
    )
    assert weights["adapters"] == ["fruit", "water"] and len(weights["weights"]) == 2
    rows = summary_rows(config, summary)
    assert [r["kind"] for r in rows] == ["adapter", "adapter", "fusion"]
    fusion_work = list(Path(config.storage).resolve().glob("fusion/fruit/*"))
    assert len(fusion_work) == 1 and (fusion_work[0] / "run" / "run.json").is_file()
    assert not (fusion_work[0] / "checkpoints").exists()  # registered: its checkpoint is gone

    before = (len(runs_of(uri, "trial")), len(runs_of(uri, "fusion")))
    again = CliRunner().invoke(app, ["run", str(path)])  # the command, in this process
    assert again.exit_code == 0, again.output
    lines = again.stdout.strip().splitlines()
    kept = "fusion fruit: kept tinysweep.fusion.fruit v1 (accuracy "  # it read "registered"
    assert lines[-7].startswith(kept) and lines[-7].endswith(", registered before)")
    assert lines[-6].startswith("| task ") and lines[-1].startswith("wall time ")
    assert [line.split("|")[1].strip() for line in lines[-4:-1]] == ["fruit", "water", "fruit"]
    assert re.search(r"\| fusion +\| v1 .*\| [+-]\d\.\d{4} \|$", lines[-2])  # with its gain
    quiet = CliRunner().invoke(app, ["run", str(path), "--quiet"])
    assert quiet.exit_code == 0, quiet.output
    summary_lines = quiet.stdout.strip().splitlines()
    assert summary_lines[:-1] == lines[-6:-1] and summary_lines[-1].startswith("wall time ")
    assert (len(runs_of(uri, "trial")), len(runs_of(uri, "fusion"))) == before == (4, 1)
    assert version_numbers(uri, "tinysweep.adapter.fruit") == [1]
    assert version_numbers(uri, "tinysweep.fusion.fruit") == [1]
    # water's train file edited in place: water is trained again, and the fusion waits for its
    # new version (it took the old @best at once and said "already registered")
    water_file = config.tasks["water"].train.path
    water_file.write_text(water_file.read_text() + "the river is wide today\tyes\n")
    changed = CliRunner().invoke(app, ["run", str(path)])
    assert changed.exit_code == 0, changed.output
    said = changed.stdout.splitlines()
    assert "task fruit: already registered as tinysweep.adapter.fruit v1, skipped" in said
    assert any(line.startswith("task water: its data files changed since") for line in said)
    retrained = (
        r"^fusion fruit: training over fruit:v1,water:v2 .*; v1 \(@best\) fused fruit:v1,water:v1$"
    )
    assert any(re.match(retrained, line) for line in said), said  # and why
    assert not any("already registered as v1 for these adapters" in line for line in said)
    assert version_numbers(uri, "tinysweep.fusion.fruit") == [1, 2]
    # each fusion version names the target's files it trained and scored on (fruit's: unchanged)
    from adapterfleet.registry import get_version
    from adapterfleet.tuning.spec import data_sha256

    tagged = {
        get_version(uri, "tinysweep.fusion.fruit", version=v).tags.get("data_sha256")
        for v in (1, 2)
    }
    assert tagged == {data_sha256(config, "fruit")} != {None}


def _check_what_the_ui_shows(uri: str, summary) -> None:
    """Sweep runs named by task with their trials' max_epochs; every run, the experiment, each
    registered model and version described; no `train.progress` param; metric tags rounded."""
    client = mlflow_client(uri)
    sweeps = {r.data.tags["adapterfleet.task"]: r for r in runs_of(uri, "sweep")}
    assert {t: r.info.run_name for t, r in sweeps.items()} == {
        "fruit": "sweep fruit",
        "water": "sweep water",
    }
    assert sweeps["water"].data.params["max_epochs"] == "3"  # task_training, as its trials
    assert sweeps["fruit"].data.params["max_epochs"] == "2"
    fruit = sweeps["fruit"].data.tags[TAG_NOTE]
    assert "Made by `adapterfleet run -c pipeline.yaml`" in fruit and "Best trial" in fruit
    runs = [*runs_of(uri, "trial"), *runs_of(uri, "fusion")]
    for run in [*runs, *sweeps.values()]:
        assert run.data.tags.get(TAG_NOTE), run.info.run_name
        assert "train.progress" not in run.data.params, run.info.run_name
    assert client.get_experiment_by_name("tinysweep").tags.get(TAG_NOTE)
    for task, info in summary.adapters.items():
        version = client.get_model_version(info.name, str(info.version))
        assert f"Adapter of task `{task}`" in version.description
        assert client.get_registered_model(info.name).description
        value = version.tags["metric_value"]
        assert value == str(round(float(value), 4))
    fusion = summary.fusions["fruit"].version
    described = client.get_model_version(fusion.name, str(fusion.version)).description
    for task, info in summary.adapters.items():
        link = f"[{task} v{info.version}](#/models/{info.name}/versions/{info.version})"
        assert link in described
    assert "over the ST-A adapter of `fruit`" in described
    assert client.get_registered_model(fusion.name).description
    accuracy = fusion.tags["dev_accuracy"]
    assert accuracy == str(round(float(accuracy), 4))


def test_fuse_wait_started_first_trains_once_another_job_registers_the_adapters(
    tmp_path, tiny_model, ray_local
):
    path = _config(tmp_path, tiny_model)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "MLFLOW_DISABLE_TELEMETRY": "true"}
    waiter = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "adapterfleet.cli.app",
            "fuse",
            "-c",
            str(path),
            "--target",
            "fruit",
            "--wait",
            "--timeout",
            "600",
            "--seed",
            "5",
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        time.sleep(3)
        assert waiter.poll() is None  # still waiting: no adapter exists yet
        from adapterfleet.orchestration.sweep import run_adapter_stage

        run_adapter_stage(load_config(path), progress=print)
        output, _ = waiter.communicate(timeout=400)
    finally:
        if waiter.poll() is None:
            waiter.kill()
    print(output)
    assert waiter.returncode == 0, output
    assert "waiting for fruit, water" in output
    uri = load_config(path).tracking_uri
    assert version_numbers(uri, "tinysweep.fusion.fruit") == [1]
    version = mlflow_client(uri).get_model_version("tinysweep.fusion.fruit", "1")
    assert version.tags["seed"] == "5"  # --seed: that seed alone, whatever fusion.seeds says
    assert "was not trained for" not in output

    # fuse takes @best as it is, and says which adapter another config's sweep would retrain
    with open(tmp_path / "data" / "water_train.tsv", "a") as handle:
        handle.write("the tide came in\tyes\n")
    again = subprocess.run(
        [sys.executable, "-m", "adapterfleet.cli.app", "fuse", "-c", str(path), "--target",
         "fruit", "--wait", "--seed", "5"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert again.returncode == 0, again.stdout + again.stderr
    assert (
        "fusion fruit: water v1 (@best) was not trained for this config's adapter settings and "
        "data (another sweep, an edited data file or an import); fusing it all the same"
    ) in again.stdout, again.stdout
    assert "fruit v1 (@best) was not" not in again.stdout


def test_only_a_cpu_fusion_over_every_swept_task_starts_with_the_pipeline(tmp_path, tiny_model):
    config = load_config(_config(tmp_path, tiny_model))  # fruit over fruit and water: all
    assert _early_target(config) == "fruit"
    subset = replace(config, fusion=replace(config.fusion, targets={"fruit": ("fruit",)}))
    assert _early_target(subset) is None  # its training could overlap the other task's trials
    gpu = replace(config, resources=replace(config.resources, gpu=1.0))
    assert _early_target(gpu) is None  # a GPU cannot be used without reserving it


def test_a_rerun_of_other_settings_warms_its_fusion_after_its_own_trials_start(
    tmp_path, tiny_model, ray_local, capfd
):
    """The gate of a fusion that is not over every swept task warms its job (a CPU reserved)
    once every trial has started. On a re-run with other settings the finished sweep of the
    settings before counted as started: the job took its CPU before the sweep began, and the
    two trials, side by side the first time, ran one after the other."""
    document = config_document(tmp_path, tiny_model, reduction_factors=[4])
    document["resources"] = {"cpu": 1}  # the two trials side by side on the 2 CPUs
    document["fusion"] = {
        "targets": {"fruit": ["fruit"]},  # not water: the gate, not the early start
        "training": {"max_epochs": 1, "batch_size": 16, "learning_rate": 0.01, "device": "cpu"},
    }
    config = load_config(write_config(tmp_path, document))
    assert _early_target(config) is None
    for epochs in (1, 2):  # the second run: other settings, so a new sweep
        stage = replace(
            config.adapters, training=replace(config.adapters.training, max_epochs=epochs)
        )
        summary = run_pipeline(replace(config, adapters=stage), say=print)
        assert not summary.errors, summary.errors
    output = capfd.readouterr().out
    second = output[output.rindex("pipeline tinysweep: validating") :].splitlines()
    begun = next(i for i, line in enumerate(second) if re.match(r"sweep \S+: starting", line))
    warm = "fusion fruit: every trial has started; warming up its job"
    # no warming before the sweep begins; none at all when fruit's trial ended before water's
    # started (a loaded machine starts a trial's worker in seconds): the gate saw it registered
    assert all(i > begun for i, line in enumerate(second) if line == warm), second
    assert any(line.startswith("fusion fruit: registered") for line in second), second


def test_a_run_whose_trials_failed_prints_what_it_registered_and_exits_1(
    tmp_path, tiny_model, ray_local
):
    """A scripting user's run with one task's trials diverged ended on the error line alone, no
    table of the adapters it did register, and exit 2 as for a typo in the config."""
    water = {"task_grid": {"water": {"learning_rates": [1e12]}}}
    path = _config(tmp_path, tiny_model, water)
    ran = CliRunner().invoke(app, ["run", str(path)])
    assert ran.exit_code == 1, ran.output
    assert "task water: not registered, trial(s) water-rf4-lr1e+12-s0" in ran.output
    (row,) = [line for line in ran.output.splitlines() if line.startswith("| fruit ")]
    assert "| adapter | v1 " in row, ran.output
    assert "error in adapters: sweep " in ran.output and "training diverged" in ran.output
    summary = run_pipeline(load_config(path), say=lambda _: None)  # from Python: no exception
    assert (
        sorted(summary.adapters) == ["fruit"] and "training diverged" in summary.errors["adapters"]
    )
