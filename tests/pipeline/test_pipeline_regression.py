"""A regression task beside a classification one through `run_pipeline` on a real local Ray and
MLflow store with the tiny model: each task swept and registered on its own metric (the
regression one on mse, lower is better), a fusion with the regression task as target and
source, then the summary, `status` and the report in each task's metric."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from tuning_support import TOPICS, config_document, runs_of, write_config

from adapterfleet.config import load_config
from adapterfleet.orchestration.pipeline import run_pipeline
from adapterfleet.orchestration.summary import summary_rows
from adapterfleet.results.report import build_report
from adapterfleet.results.status import pipeline_status

pytestmark = pytest.mark.integration


def _write_scores(folder: Path) -> dict:
    """`score`: 5 x the share of fruit words among a sentence's four content words."""
    rng = random.Random(1)
    fruit, other = TOPICS["fruit"][0].split(), TOPICS["water"][0].split()
    for split, count in (("train", 80), ("dev", 40)):
        lines = ["text\tscore"]
        for index in range(count):
            k = index % 5
            words = rng.sample(fruit, k) + rng.sample(other, 4 - k) + ["the", "a"]
            rng.shuffle(words)
            lines.append(f"{' '.join(words)}\t{k * 1.25}")
        (folder / f"score_{split}.tsv").write_text("\n".join(lines) + "\n")
    return {
        "type": "regression",
        "train": "score_train.tsv",
        "dev": "score_dev.tsv",
        "text_fields": ["text"],
        "label_field": "score",
        "range": [0, 5],
    }


@pytest.fixture(scope="module")
def ran(tiny_model, ray_local, tmp_path_factory):
    root = tmp_path_factory.mktemp("regression")
    document = config_document(root, tiny_model, task_training={"score": {"metric": "mse"}})
    document["tasks"] = {"water": document["tasks"]["water"], "score": _write_scores(root / "data")}
    training = {"max_epochs": 1, "batch_size": 16, "learning_rate": 0.01, "device": "cpu"}
    document["fusion"] = {"targets": {"score": "all"}, "training": training}
    config = load_config(write_config(root, document))
    return config, run_pipeline(config, say=lambda line: None)


def test_each_task_is_registered_on_its_own_metric_and_direction(ran) -> None:
    config, summary = ran
    assert sorted(summary.adapters) == ["score", "water"] and not summary.errors
    score, water = summary.adapters["score"].tags, summary.adapters["water"].tags
    assert (score["metric"], score["metric_direction"]) == ("mse", "min")
    assert (water["metric"], water["metric_direction"]) == ("accuracy", "max")
    uri = config.tracking_uri
    trials = [r for r in runs_of(uri, "trial") if r.data.tags["adapterfleet.task"] == "score"]
    assert len(trials) == 2 and all("best_dev_pearson" in r.data.metrics for r in trials)
    best = min(trials, key=lambda r: r.data.metrics["best_dev_mse"])  # lower is better
    assert score["adapterfleet.trial_id"] == best.data.tags["adapterfleet.trial_id"]
    assert float(score["metric_value"]) == round(best.data.metrics["best_dev_mse"], 4)


def test_a_fusion_of_a_regression_target_over_a_regression_source(ran) -> None:
    config, summary = ran
    fusion = summary.fusions["score"]
    assert fusion.trained and set(fusion.dev_metrics) == {"pearson", "spearman", "mse"}
    assert fusion.version.tags["metric"] == "pearson"  # fusion.training names none: the default
    assert fusion.version.tags["adapter.score"] == f"v{summary.adapters['score'].version}"
    rows = {(r["task"], r["kind"]): r for r in summary_rows(config, summary)}
    assert "dev accuracy" in rows[("water", "adapter")]
    assert "dev mse" in rows[("score", "adapter")] and "dev mse" in rows[("score", "fusion")]


def test_status_and_report_show_each_task_in_its_metric(ran, tmp_path) -> None:
    config, _ = ran
    text = pipeline_status(config, config.tracking_uri).render()
    score_line = next(line for line in text.splitlines() if line.startswith("score "))
    water_line = next(line for line in text.splitlines() if line.startswith("water "))
    assert score_line.split()[-3] == "mse" and water_line.split()[-3] == "accuracy", text
    report = build_report(config.name, config.tracking_uri, tmp_path, log_to_mlflow=False)
    data = json.loads((tmp_path / "report.json").read_text())
    assert data["task_metrics"] == {"score": "mse"}
    cells = {(c["task"], c["system"]): c for c in data["cells"]}
    assert cells[("score", "st-a")]["mse"]["n"] == 1
    assert cells[("score", "fusion-st-a")]["mse"]["n"] == 1
    assert "| score (mse) " in report.table and "| water " in report.table
