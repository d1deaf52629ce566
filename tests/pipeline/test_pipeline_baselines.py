"""The rest of the paper's Table 1 in `adapterfleet run`: fusion seeds and the baseline systems,
on a real local Ray and a real SQLite MLflow store with a tiny model; a re-run trains nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tuning_support import PIPELINE, config_document, mlflow_client, runs_of, write_config

from adapterfleet.config import load_config
from adapterfleet.orchestration.baselines import plan_baselines
from adapterfleet.orchestration.pipeline import run_pipeline
from adapterfleet.orchestration.summary import summary_rows

pytestmark = pytest.mark.integration
FAST = {"max_epochs": 2, "batch_size": 16, "learning_rate": 0.01, "device": "cpu"}


def _document(tmp_path: Path, model: Path) -> dict:
    document = config_document(tmp_path, model, reduction_factors=[8])
    document["fusion"] = {"targets": {"fruit": "all"}, "seeds": [0, 1], "training": FAST}
    document["baselines"] = {
        "systems": ["head", "full", "st-a-houlsby", "mt-a", "fusion-mt-a"],
        "tasks": ["fruit"],
        "seeds": [0],
        "reduction_factor": 8,
        "training": FAST,
        "system_training": {"full": {"learning_rate": 0.001}},
    }
    document["budgets"] = {"small": {"baselines": {"training": {"max_epochs": 1}}}}
    document["budget"] = "small"
    return document


def _all_splits() -> set[str]:
    return {f"{task}-{split}" for task in ("fruit", "water") for split in ("train", "dev")}


def _tags(run) -> tuple[str, str, str]:
    tags = run.data.tags
    return tags["adapterfleet.system"], tags["adapterfleet.task"], tags["seed"]


def test_fusion_seeds_and_baselines_are_trained_logged_and_not_redone(
    tmp_path, tiny_model, ray_local
):
    same = ["baselines.training.max_epochs=1"]  # as the budget sets it: recorded all the same
    config = load_config(write_config(tmp_path, _document(tmp_path, tiny_model)), same)
    assert config.baselines.training_for("head").max_epochs == 1  # the budget's change
    assert config.baselines.training_for("full").learning_rate == 0.001
    said: list[str] = []
    summary = run_pipeline(config, say=said.append)
    uri = config.tracking_uri
    client = mlflow_client(uri)
    assert not summary.errors, summary.errors

    # one fusion per seed, each registered with its seed; `best` on the better one
    versions = client.search_model_versions(f"name = '{PIPELINE}.fusion.fruit'")
    assert sorted(v.tags["seed"] for v in versions) == ["0", "1"]
    best = client.get_model_version_by_alias(f"{PIPELINE}.fusion.fruit", "best")
    scores = {v.version: float(v.tags["dev_accuracy"]) for v in versions}
    assert scores[best.version] == max(scores.values())
    # a line per seed's registration, then which is best: it read `registered ... v1` a third
    # time, as if one more had been registered
    fusion_lines = [line for line in said if line.startswith("fusion fruit: ")]
    assert sum(": seed " in line and " registered " in line for line in fusion_lines) == 2
    last = [line for line in fusion_lines if "the best of 2 seeds is" in line]
    expected = (  # a note may follow: no better than chance, best kept elsewhere
        f"fusion fruit: the best of 2 seeds is {PIPELINE}.fusion.fruit v{best.version} "
        f"(seed {best.tags['seed']}, accuracy {scores[best.version]:.4f})"
    )
    assert len(last) == 1 and last[0].startswith(expected), fusion_lines
    assert not [line for line in fusion_lines if line.startswith("fusion fruit: registered")]
    fusion_runs = runs_of(uri, "fusion")
    assert sorted(r.data.tags["seed"] for r in fusion_runs) == ["0", "1"]
    assert {r.data.tags["adapterfleet.system"] for r in fusion_runs} == {"fusion-st-a"}
    names = sorted(r.info.run_name for r in fusion_runs)  # both were `fusion-fruit`
    assert [n[: len("fusion-fruit-s0-")] for n in names] == ["fusion-fruit-s0-", "fusion-fruit-s1-"]

    # every baseline: a FINISHED run per (system, task, seed) holding the task's metric
    baseline_runs = runs_of(uri, "baseline")
    assert sorted(_tags(r) for r in baseline_runs) == [
        ("full", "fruit", "0"),
        ("fusion-mt-a", "fruit", "0"),
        ("head", "fruit", "0"),
        ("mt-a", "fruit", "0"),
        ("mt-a", "water", "0"),
        ("st-a-houlsby", "fruit", "0"),
    ]
    for run in baseline_runs:
        assert run.info.status == "FINISHED"
        assert 0.0 <= run.data.metrics["best_dev_accuracy"] <= 1.0
    joint = runs_of(uri, "mt-a")
    assert len(joint) == 1 and joint[0].info.status == "FINISHED"
    per_task = [r for r in baseline_runs if r.data.tags["adapterfleet.system"] == "mt-a"]
    assert {r.data.tags["mlflow.parentRunId"] for r in per_task} == {joint[0].info.run_id}
    head = next(r for r in baseline_runs if r.data.tags["adapterfleet.system"] == "head")
    assert [m.step for m in client.get_metric_history(head.info.run_id, "train_loss")] == [1]
    # the data each trained on, as MLflow's dataset inputs: MT-A's joint run every task's
    for run, expected in ((head, {"fruit-train", "fruit-dev"}), (joint[0], _all_splits())):
        inputs = client.get_run(run.info.run_id).inputs.dataset_inputs
        assert {i.dataset.name for i in inputs} == expected
    fusion_mt_a = next(
        r for r in baseline_runs if r.data.tags["adapterfleet.system"] == "fusion-mt-a"
    )
    weights = json.loads(
        Path(
            client.download_artifacts(fusion_mt_a.info.run_id, "fusion_weights.json", tmp_path)
        ).read_text()
    )
    assert weights["adapters"] == ["fruit", "water"] and len(weights["weights"]) == 2
    logged = {a.path for a in client.list_artifacts(fusion_mt_a.info.run_id)}
    assert {"fusion", "head", "run.json", "fusion_weights.json"} <= logged
    full = next(r for r in baseline_runs if r.data.tags["adapterfleet.system"] == "full")
    logged = {a.path for a in client.list_artifacts(full.info.run_id)}
    assert "run.json" in logged and "model" not in logged  # the encoder stays on storage
    houlsby = next(r for r in baseline_runs if r.data.tags["adapterfleet.system"] == "st-a-houlsby")
    assert houlsby.data.params["reduction_factor"] == "8"  # the report's chosen-point line
    storage = Path(config.storage) / "baselines"
    assert len(list(storage.iterdir())) == 5 and not list(storage.glob("*/checkpoints/*"))
    outcomes = {(o.job.system, o.job.seed): o for o in summary.baselines.outcomes}
    assert set(outcomes) == {(s, 0) for s in config.baselines.systems}
    assert set(outcomes[("mt-a", 0)].dev_metrics) == {"fruit", "water"}
    kinds = [row["kind"] for row in summary_rows(config, summary)]
    assert kinds.count("mt-a s0") == 2 and "fusion-mt-a s0" in kinds

    # the pipeline's report counts every run it made: each is of the config's settings
    assert summary.report is not None
    assert {s for t, s in summary.report.cells if t == "fruit"} == {
        "head", "full", "st-a", "st-a-houlsby", "mt-a", "fusion-st-a", "fusion-mt-a"
    }  # fmt: skip
    assert not [n for n in summary.report.notes if "left out" in n], summary.report.notes

    # the experiment says which budget ran and what it changed
    experiment = client.get_experiment_by_name(PIPELINE)
    assert experiment.tags["adapterfleet.budget"] == "small"
    assert json.loads(experiment.tags["adapterfleet.budget_trimmed"]) == {
        "baselines.training.max_epochs": 1
    }
    # loaded with them and run from Python without `overrides=`: it recorded `[]`
    assert json.loads(experiment.tags["adapterfleet.overrides"]) == same

    # a re-run finds everything finished: no training, no new runs or versions
    said.clear()
    again = run_pipeline(config, say=said.append)
    assert not again.errors and not again.fusions["fruit"].trained
    head = [line for line in said if line.startswith("baseline head fruit seed 0: ")]
    assert len(head) == 1 and head[0].endswith(" (finished before)"), head  # it said it twice
    assert all(not o.trained for o in again.baselines.outcomes)
    assert len(runs_of(uri, "baseline")) == 6 and len(runs_of(uri, "fusion")) == 2
    assert len(client.search_model_versions(f"name = '{PIPELINE}.fusion.fruit'")) == 2


def test_baseline_jobs_are_named_by_their_settings(tmp_path, tiny_model):
    document = _document(tmp_path, tiny_model)
    path = write_config(tmp_path, document)
    jobs = plan_baselines(load_config(path))
    assert [j.system for j in jobs][:1] == ["mt-a"]  # MT-A first: fusion-mt-a waits on it
    assert len(jobs) == 5 and len({j.job_id for j in jobs}) == 5
    changed = plan_baselines(load_config(path, ["baselines.system_training.full.max_epochs=5"]))
    before = {j.system: j.job_id for j in jobs}
    after = {j.system: j.job_id for j in changed}
    assert [s for s in before if before[s] != after[s]] == ["full"]
    mt_a = plan_baselines(load_config(path, ["baselines.system_training.mt-a.max_epochs=5"]))
    moved = {j.system for j, k in zip(jobs, mt_a, strict=True) if j.job_id != k.job_id}
    assert moved == {"mt-a", "fusion-mt-a"}  # the fusion over MT-A depends on MT-A's settings


def test_an_edited_data_file_renames_the_jobs_that_read_it(tmp_path, tiny_model):
    path = write_config(tmp_path, _document(tmp_path, tiny_model))
    before = {j.system: j.job_id for j in plan_baselines(load_config(path))}
    with open(tmp_path / "data" / "water_train.tsv", "a") as handle:
        handle.write("the river runs to the sea\tyes\n")
    after = {j.system: j.job_id for j in plan_baselines(load_config(path))}
    # water is an adapter task, not a baseline task: only the MT-A jobs read it
    assert {s for s in before if before[s] != after[s]} == {"mt-a", "fusion-mt-a"}
    with open(tmp_path / "data" / "fruit_dev.tsv", "a") as handle:
        handle.write("a ripe pear\tyes\n")
    last = {j.system: j.job_id for j in plan_baselines(load_config(path))}
    assert all(after[s] != last[s] for s in after)  # every job reads fruit
