"""One real sweep (local Ray, SQLite MLflow, tiny BERT): 2 tasks × rf {4, 8}, 2 epochs each.

The module runs the sweep once; the tests read what it left behind in Ray's storage and MLflow.
The last two tests re-run the stage on that state, so keep them in this order.
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
from tuning_support import (
    config_document,
    expected_best,
    metric_steps,
    mlflow_client,
    mlflow_gc,
    runs_of,
    version_numbers,
)

from adapterfleet.config import PipelineConfig, parse_config
from adapterfleet.data import load_task
from adapterfleet.data.baseline import majority
from adapterfleet.orchestration.sweep import run_adapter_stage
from adapterfleet.registry import ModelVersionInfo, adapter_model_name, pull, sha256_file
from adapterfleet.registry.tags import TAG_TRIAL_ID
from adapterfleet.tuning.spec import TAG_CONFIG_HASH, task_config_hash

pytestmark = pytest.mark.integration
TASKS = ("fruit", "water")


@dataclass
class Swept:
    config: PipelineConfig
    uri: str
    registered: dict[str, ModelVersionInfo]
    lines: list[str]


@pytest.fixture(scope="module")
def swept(ray_local: None, tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Swept:
    root = tmp_path_factory.mktemp("sweep")
    config = parse_config(config_document(root, tiny_model), root)
    lines: list[str] = []
    registered = run_adapter_stage(config, progress=lines.append)
    return Swept(config, config.tracking_uri, registered, lines)


def _trial_runs(swept: Swept) -> list[Any]:
    return runs_of(swept.uri, "trial")


def test_the_best_adapter_of_each_task_is_registered_with_its_tags(swept: Swept) -> None:
    assert sorted(swept.registered) == list(TASKS)
    trial_runs = _trial_runs(swept)
    for task in TASKS:
        info = swept.registered[task]
        assert info.name == adapter_model_name("tinysweep", task) == f"tinysweep.adapter.{task}"
        assert info.aliases == ("best",)
        assert info.tags["base_model_dtype"] == "auto"  # the dtype its base trained in
        winner = expected_best(trial_runs, task)
        run = next(r for r in trial_runs if r.data.tags["adapterfleet.trial_id"] == winner)
        assert info.run_id == run.info.run_id
        assert info.source == f"runs:/{run.info.run_id}/adapter"
        tags = info.tags
        assert tags["adapterfleet.trial_id"] == winner
        assert tags["config_hash"] == task_config_hash(swept.config, task)
        assert tags["base_model"] == swept.config.base_model
        assert tags["metric"] == "accuracy"
        assert float(tags["metric_value"]) == round(run.data.metrics["best_dev_accuracy"], 4)
        assert tags["reduction_factor"] == run.data.params["reduction_factor"]
        assert float(tags["learning_rate"]) == 0.01
        assert tags["adapterfleet.sweep"].startswith("tinysweep-")
        assert tags["sha256"] == run.data.tags["sha256"]
        assert version_numbers(swept.uri, info.name) == [1]


def test_mlflow_holds_one_run_per_trial_and_one_parent_per_task(swept: Swept) -> None:
    trial_runs = _trial_runs(swept)
    parents = runs_of(swept.uri, "sweep")
    assert sorted(r.data.tags["adapterfleet.task"] for r in parents) == list(TASKS)
    assert all(r.info.status == "FINISHED" for r in parents)
    parent_of = {r.data.tags["adapterfleet.task"]: r.info.run_id for r in parents}
    assert sorted(r.data.tags["adapterfleet.trial_id"] for r in trial_runs) == [
        "fruit-rf4-lr0.01-s0",
        "fruit-rf8-lr0.01-s0",
        "water-rf4-lr0.01-s0",
        "water-rf8-lr0.01-s0",
    ]
    client = mlflow_client(swept.uri)
    for run in trial_runs:
        task = run.data.tags["adapterfleet.task"]
        assert run.info.status == "FINISHED"
        assert run.data.tags["mlflow.parentRunId"] == parent_of[task]
        assert metric_steps(swept.uri, run.info.run_id, "dev_accuracy") == [1, 2]
        assert metric_steps(swept.uri, run.info.run_id, "train_loss") == [1, 2]
        assert len(metric_steps(swept.uri, run.info.run_id, "best_dev_accuracy")) == 1
        assert run.data.params["learning_rate"] == "0.01"
        # an auditor's retraining differed in the last digits: the trial's torch threads
        assert run.data.tags["adapterfleet.torch_threads"] == "2"  # the config's cpu: 2
        artifacts = {a.path for a in client.list_artifacts(run.info.run_id, "adapter")}
        assert artifacts == {"adapter/adapter.safetensors", "adapter/adapter_config.json"}


def test_each_trial_run_names_the_data_it_trained_and_was_scored_on(swept: Swept) -> None:
    """The runs table's Dataset column showed "-" for every trial."""
    import json

    client = mlflow_client(swept.uri)
    for run in _trial_runs(swept):
        task = run.data.tags["adapterfleet.task"]
        inputs = client.get_run(run.info.run_id).inputs.dataset_inputs
        found = {
            i.dataset.name: (i.tags[0].value, json.loads(i.dataset.profile)["num_rows"])
            for i in inputs
        }
        assert found == {f"{task}-train": ("train", 80), f"{task}-dev": ("eval", 40)}


def test_pulling_best_gives_the_registered_weights(swept: Swept, tmp_path: Path) -> None:
    for task, info in swept.registered.items():
        folder = pull(swept.uri, info.name, tmp_path / task)
        assert sha256_file(folder / "adapter.safetensors") == info.sha256
        assert (folder / "adapter_config.json").is_file()


def test_a_progress_line_per_epoch_and_per_finished_trial(swept: Swept) -> None:
    done = [line for line in swept.lines if re.match(r"trial \S+: ", line)]
    assert len(done) == 4, swept.lines
    assert all("dev accuracy" in line for line in done)
    epoch = re.compile(r"trial (\S+) epoch (\d)/2: .*\[trials \d done, \d running, \d pending\]$")
    seen = sorted((m[1], int(m[2])) for m in map(epoch.match, swept.lines) if m)
    trials = [run.data.tags["adapterfleet.trial_id"] for run in _trial_runs(swept)]
    assert seen == sorted((trial, e) for trial in trials for e in (1, 2))  # every epoch, once
    assert sum(line.startswith("task ") and "registered" in line for line in swept.lines) == 2
    for task in TASKS:  # each held against what always giving dev's commonest label scores
        (line,) = [x for x in swept.lines if x.startswith(f"task {task}: registered")]
        value = float(re.search(r"dev accuracy (\d\.\d{4})", line)[1])
        data = load_task(swept.config.tasks[task])
        share = majority(data.dev["label"], data.label_names).share
        assert ("; no better than always answering" in line) == (value <= share), (line, share)
    started = [line for line in swept.lines if line.startswith("sweep ")]
    assert len(started) == 1 and started[0].endswith(": starting, 2 tasks, 4 trials"), started


def test_each_trial_keeps_tunes_csv_and_json_logs_and_no_tensorboard_writer(swept: Swept) -> None:
    """Tune's TensorBoard logger handed each result to a writer thread through a queue; a
    Ctrl-C landing just after the driver took that queue's lock kept it held, and the exit,
    flushing the writer, hung for a minute and printed every thread's stack (a CI run of
    25f1822). Tune's CSV and JSON logs stay; the TensorBoard one is not started."""
    storage = Path(swept.config.storage)
    trials = sorted(path.parent for path in storage.glob("ray/tinysweep/*/result.json"))
    assert len(trials) == 4, trials
    assert all((trial / "progress.csv").is_file() for trial in trials), trials
    assert not list(storage.glob("ray/**/events.out.tfevents*"))


def _trial_state(swept: Swept) -> dict[str, Any]:
    """What a re-run must not change: trial runs, their metric histories, Tune's results."""
    runs = sorted(_trial_runs(swept), key=lambda r: r.info.run_id)
    storage = Path(swept.config.storage)
    results = sorted(storage.glob("ray/tinysweep/*/result.json"))
    return {
        "runs": [(r.info.run_id, r.info.status, r.info.end_time) for r in runs],
        "steps": [metric_steps(swept.uri, r.info.run_id, "dev_accuracy") for r in runs],
        "results": [p.read_text() for p in results],
    }


def test_rerunning_a_finished_sweep_runs_and_registers_nothing(swept: Swept) -> None:
    before = _trial_state(swept)
    lines: list[str] = []
    again = run_adapter_stage(swept.config, progress=lines.append)
    assert {t: (i.name, i.version) for t, i in again.items()} == {
        t: (i.name, i.version) for t, i in swept.registered.items()
    }
    assert sum("already registered" in line for line in lines) == 2
    assert not any(line.startswith("trial ") for line in lines)
    assert _trial_state(swept) == before
    for info in swept.registered.values():
        assert version_numbers(swept.uri, info.name) == [1]


def _moved(config: PipelineConfig, folder: Path) -> PipelineConfig:
    """`config` with each task's files copied into `folder`: another user's storage or checkout,
    or the data moved."""
    tasks = {}
    for name, spec in config.tasks.items():
        moved = {}
        for split in ("train", "dev"):
            source = getattr(spec, split)
            copy = folder / name / source.path.name
            copy.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source.path, copy)
            moved[split] = replace(source, path=copy)
        tasks[name] = replace(spec, **moved)
    return replace(config, tasks=tasks)


def test_the_same_files_in_another_folder_are_not_trained_again(
    swept: Swept, tmp_path: Path
) -> None:
    """A colleague's run of the pipeline against the same MLflow server, with its own storage
    (where the demo writes its data) or checkout: every adapter trained again, as v2 with the
    same weights, since the config hash named the files by path."""
    from adapterfleet.orchestration.baseline_plan import plan_baselines
    from adapterfleet.orchestration.fusion_plan import lineage_key
    from adapterfleet.tuning.plan import current_keys, is_current, plan_sweep
    from adapterfleet.tuning.spec import task_config_hashes, task_settings

    moved = _moved(swept.config, tmp_path / "elsewhere")
    plan = plan_sweep(moved, swept.uri, "0")
    assert plan.pending == () and not plan.changed, plan  # both found registered
    assert task_config_hash(moved, "fruit") == task_config_hash(swept.config, "fruit")
    versions = dict(swept.registered)
    assert lineage_key(moved, "fruit", versions) == lineage_key(swept.config, "fruit", versions)
    assert [j.job_id for j in plan_baselines(moved)] == [
        j.job_id for j in plan_baselines(swept.config)
    ]
    assert "path" not in task_settings(moved, "fruit")["task"]["train"]  # data_sha256 names it
    # a version registered before the paths were left out: taken where its files still are
    current, by_path = task_config_hashes(swept.config, "fruit")
    assert by_path != current == task_config_hash(swept.config, "fruit")
    info = swept.registered["fruit"]
    before = replace(info, tags={**info.tags, TAG_CONFIG_HASH: by_path})
    assert is_current(before, current_keys(swept.config, "fruit"))
    assert not is_current(before, current_keys(moved, "fruit"))  # by path: not elsewhere
    # the same settings on other data are still another task's training
    edited = tmp_path / "elsewhere" / "fruit" / moved.tasks["fruit"].train.path.name
    edited.write_text(edited.read_text() + "a ripe mango\tyes\n")
    assert plan_sweep(moved, swept.uri, "0").changed.keys() == {"fruit"}


def test_registering_again_and_registering_after_a_restore(swept: Swept) -> None:
    """A task whose registration was lost is registered from the restored, finished sweep
    (no trial runs again); registering the same trial twice keeps a single version."""
    before = _trial_state(swept)
    name = swept.registered["water"].name
    mlflow_client(swept.uri).delete_registered_model(name)
    lines: list[str] = []
    again = run_adapter_stage(swept.config, progress=lines.append)
    assert any("resuming" in line for line in lines), lines
    assert (
        again["water"].tags["adapterfleet.trial_id"]
        == (swept.registered["water"].tags["adapterfleet.trial_id"])
    )
    assert again["water"].sha256 == swept.registered["water"].sha256
    assert again["fruit"].version == swept.registered["fruit"].version
    assert version_numbers(swept.uri, name) == [1]
    assert _trial_state(swept) == before
    # the same registration once more (the registry's idempotence, through the sweep's path)
    lines.clear()
    mlflow_client(swept.uri).delete_registered_model_alias(name, "best")
    once_more = run_adapter_stage(swept.config, progress=lines.append)
    assert once_more["water"].version == 1 and once_more["water"].aliases == ("best",)
    assert version_numbers(swept.uri, name) == [1]


def test_a_task_whose_data_files_changed_is_trained_again(swept: Swept) -> None:
    """The config hash names a task's files by path: a rerun after its train file was edited in
    place said `already registered ..., skipped` and kept the adapter of the old data. (Runs
    after the two above: it changes the module's state.)"""
    from adapterfleet.tuning.plan import plan_sweep

    water = swept.config.tasks["water"].train.path
    rows = water.read_text().splitlines()
    water.write_text("\n".join(rows[:1] + rows[:0:-1]) + "\n")  # the same rows, reversed
    lines: list[str] = []
    again = run_adapter_stage(swept.config, progress=lines.append)
    name = swept.registered["water"].name
    said = f"task water: its data files changed since {name} v1 was registered for these settings"
    assert f"{said}; training it again" in lines
    assert sum("already registered" in line for line in lines) == 1  # fruit
    trained = {line.split()[1].split("-")[0] for line in lines if line.startswith("trial ")}
    assert trained == {"water"}, lines
    assert again["water"].version == 2 and again["fruit"].version == 1
    assert again["water"].tags["data_sha256"] != swept.registered["water"].tags["data_sha256"]
    plan = plan_sweep(swept.config, swept.uri, "0")  # what a third run would do: nothing
    assert plan.pending == () and not plan.changed
    # the file as it was: v1 was trained on it (it was trained a third time, as a v3)
    water.write_text("\n".join(rows) + "\n")
    lines.clear()
    back = run_adapter_stage(swept.config, progress=lines.append)
    restored = f"task water: already registered as {name} v1, skipped; it was trained for "
    restored += "these settings and data: @best is v1 again (it was on v2, registered for other "
    restored += "settings or data)"
    assert restored in lines, lines
    assert not any(line.startswith("trial ") for line in lines), lines
    assert back["water"].version == 1 and back["water"].aliases == ("best",)
    assert version_numbers(swept.uri, name) == [1, 2]


def test_a_task_whose_settings_changed_is_planned_again_saying_which(swept: Swept) -> None:
    """A rerun with other settings for a task trained it again without a word of why (the data
    files' change is said). Each registered version now records its settings, and the plan
    names what differs, in the config's keys."""
    from dataclasses import replace

    from adapterfleet.orchestration.sweep import _say_planned
    from adapterfleet.tuning.plan import plan_sweep
    from adapterfleet.tuning.settings import changed_settings

    config = swept.config
    fruit = replace(config.tasks["fruit"], max_train_examples=40)
    training = replace(config.adapters.training, max_epochs=3)
    changed = replace(
        config,
        tasks={**config.tasks, "fruit": fruit},
        adapters=replace(config.adapters, training=training),
    )
    plan = plan_sweep(changed, swept.uri, "0")
    assert plan.pending == ("fruit", "water")
    lines: list[str] = []
    _say_planned(plan, swept.uri, lines.append)
    name = swept.registered["fruit"].name
    assert (
        f"task fruit: its settings changed since {name} v1 was registered "
        "(tasks.fruit.max_train_examples: none → 40, adapters.training.max_epochs: 2 → 3); "
        "training it again"
    ) in lines, lines
    assert any(
        line.startswith("task water: its settings changed since")
        and "(adapters.training.max_epochs: 2 → 3)" in line
        for line in lines
    ), lines
    assert changed_settings(changed, "fruit", None) == []  # a version from before the tag
    # resuming the interrupted sweep of the new settings: not "training it again" (a tester
    # read it as a restart, though the sweep went on from its last epochs)
    resumed: list[str] = []
    _say_planned(replace(plan, restore=True), swept.uri, resumed.append)
    assert any(
        line.startswith(f"task fruit: its settings changed since {name} v1 was registered")
        and line.endswith("; its interrupted sweep goes on")
        for line in resumed
    ), resumed


def test_an_adapter_whose_run_mlflow_gc_purged_is_planned_again(swept: Swept) -> None:
    """After `mlflow experiments delete` and `mlflow gc`, the registry keeps the versions of the
    purged runs: a rerun said `already registered as ... v1, skipped`, `status` showed `v1 @best`,
    and only a pull failed. Now the version counts as not registered: `status` says so, the
    pipeline's fusion waits for a new one, and the plan trains the task again in a new sweep
    (restoring the finished one would register the same purged trial). (Runs after the tests
    above: it changes the module's state; the rerun itself is `adapterfleet run`'s, as in the
    test above.)"""
    from adapterfleet.orchestration.fusion_plan import current_adapter
    from adapterfleet.orchestration.sweep import _say_planned
    from adapterfleet.results.status import pipeline_status
    from adapterfleet.tuning.plan import plan_sweep

    fruit = swept.registered["fruit"]
    assert plan_sweep(swept.config, swept.uri, "0").pending == ()
    mlflow_gc(swept.uri, [fruit.run_id])
    gone = (
        f"its run {fruit.run_id} is no longer in the tracking store, nor are its files "
        "(deleted, then purged by mlflow gc)"
    )
    status = pipeline_status(swept.config, swept.uri)
    note = f"adapter fruit v1 @best: {gone}; the next run of the pipeline trains it again"
    assert status.tasks[0].note == note, status.render()
    assert not current_adapter(swept.config, {fruit.name: "fruit"}, swept.uri)(fruit)
    plan = plan_sweep(swept.config, swept.uri, "0")
    assert plan.pending == ("fruit",) and set(plan.purged) == {"fruit"}, plan
    assert not plan.restore  # the first sweep, set aside in previous/, would match
    lines: list[str] = []
    _say_planned(plan, swept.uri, lines.append)
    assert lines == [
        f"task water: already registered as {swept.registered['water'].name} v1, skipped",
        f"task fruit: {fruit.name} v1 is registered, but {gone}; training it again",
    ]


def test_a_diverged_trial_loses_its_point_and_an_all_diverged_task_fails(
    ray_local: None, tiny_model: Path, tmp_path: Path
) -> None:
    """A learning rate that turns the loss into NaN trained on and registered a NaN adapter;
    now the trial stops, and its line says why (it said `FAILED`). Its retries (two by default)
    each trained the epoch again to diverge alike, each said `failed (...), retrying from its
    last checkpoint`: they fail at once, unsaid. A grid whose steepest rate diverged lost the
    whole task, and the error said to resume, which diverges again: now that point loses and
    the others' best is registered; a task whose every trial diverged fails, told to lower the
    rates."""
    from adapterfleet.tuning.spec import SweepError

    document = config_document(tmp_path, tiny_model, reduction_factors=[4], learning_rates=[1e12])
    document["adapters"]["task_grid"] = {"water": {"learning_rates": [1e-3, 1e12]}}
    document["adapters"]["training"]["max_epochs"] = 1
    del document["adapters"]["training"]["learning_rate"]  # the grid's rate, not 0.01
    config = parse_config(document, tmp_path)
    lines: list[str] = []
    with pytest.raises(SweepError) as caught:
        run_adapter_stage(config, progress=lines.append)  # with its retries
    cause = (
        "(epoch 1: the mean train loss is nan: training diverged; lower learning_rate (now 1e+12)"
    )
    error = str(caught.value)
    assert f"fruit: trial(s) fruit-rf4-lr1e+12-s0 failed {cause}" in error
    assert error.endswith(
        "; lower the learning rates (adapters.learning_rates, task_grid) and run again"
    )
    assert "water" not in error
    for trial in ("fruit-rf4-lr1e+12-s0", "water-rf4-lr1e+12-s0"):
        failed = [line for line in lines if line.startswith(f"trial {trial}: ")]
        assert len(failed) == 1 and failed[0].startswith(f"trial {trial}: FAILED {cause}"), lines
    assert not any("retrying" in line for line in lines), lines
    assert version_numbers(config.tracking_uri, "tinysweep.adapter.fruit") == []
    assert version_numbers(config.tracking_uri, "tinysweep.adapter.water") == [1]
    assert caught.value.registered["water"].tags[TAG_TRIAL_ID] == "water-rf4-lr0.001-s0"
    assert "task water: left out trial(s) water-rf4-lr1e+12-s0, which diverged" in lines


def test_a_trial_that_patience_ends_says_so_on_its_line(
    ray_local: None, tiny_model: Path, tmp_path: Path
) -> None:
    """A trial that early stopping ended at epoch 2 of 6 said only its best epoch, which read
    as a trial that trained its six epochs."""
    document = config_document(tmp_path, tiny_model, reduction_factors=[4], learning_rates=[1e-12])
    document["adapters"]["tasks"] = ["fruit"]
    document["adapters"]["training"].update(max_epochs=6, patience=1)  # dev never improves
    del document["adapters"]["training"]["learning_rate"]  # the grid's rate, not 0.01
    config = parse_config(document, tmp_path)
    lines: list[str] = []
    run_adapter_stage(config, progress=lines.append)
    ended = [line for line in lines if line.startswith("trial fruit-rf4-lr1e-12-s0: dev ")]
    assert len(ended) == 1 and ended[0].endswith(", patience 1 ended it at epoch 2/6 [1/1]"), lines
