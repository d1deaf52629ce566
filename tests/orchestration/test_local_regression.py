"""STS-B (regression) through the one-machine commands with the real MiniLM on a slice: train an
ST-A adapter on its own metric, evaluate the saved run, fuse with a regression adapter as target
and as source, and predict numbers from the saved folders (the registry-free part of predict)."""

import json
from dataclasses import replace
from pathlib import Path

import pytest
from helpers import GLUE_DIR

from adapterfleet.adapters import load_tokenizer
from adapterfleet.config import load_config
from adapterfleet.data.prediction_input import encode_input, read_input
from adapterfleet.orchestration.commands import fusion_training
from adapterfleet.orchestration.local import adapter_training, evaluate_run, fuse_task, train_task
from adapterfleet.orchestration.predict import (
    check_head,
    load_model,
    prediction_rows,
    write_predictions,
)
from adapterfleet.training.predict import predict_probabilities

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(not GLUE_DIR.is_dir(), reason=f"GLUE data not found at {GLUE_DIR}")
REGRESSION_METRICS = {"pearson", "spearman", "mse"}


@pytest.fixture(scope="module")
def glue(tmp_path_factory):
    storage = tmp_path_factory.mktemp("runs")
    slice_ = [
        f"tasks.{t}.max_{s}_examples={n}"
        for t in ("stsb", "rte")
        for s, n in (("train", 48), ("dev", 24))
    ]
    return load_config(
        ROOT / "configs" / "glue.yaml", [*slice_, f"storage={storage}", "max_length=64"]
    )


@pytest.fixture(scope="module")
def adapters(glue, tmp_path_factory):
    """ST-A adapters of stsb and rte, one epoch each, in their own metrics."""
    out = tmp_path_factory.mktemp("adapters")
    runs = {}
    for task in ("stsb", "rte"):
        training = adapter_training(glue, task, learning_rate=1e-3, max_epochs=1, batch_size=16)
        runs[task] = train_task(glue, task, "st-a", out / task, reduction_factor=32,
                                train_config=training)  # fmt: skip
    return runs


def test_st_a_on_stsb_selects_on_pearson_and_evaluates_the_same(glue, adapters) -> None:
    run = adapters["stsb"]
    assert run.fit.best_metric == run.dev_metrics["pearson"]
    assert set(run.dev_metrics) == REGRESSION_METRICS and -1.0 <= run.dev_metrics["pearson"] <= 1.0
    saved = json.loads((run.out_dir / "run.json").read_text())
    assert saved["train_config"]["metric"] == "pearson"
    head = json.loads((run.out_dir / "head" / "head_config.json").read_text())["config"]
    assert head["head_type"] == "regression" and head["value_range"] == [0.0, 5.0]
    again = evaluate_run(glue, "stsb", run.out_dir)
    assert again == pytest.approx(run.dev_metrics)
    assert "accuracy" in adapters["rte"].dev_metrics  # the classification task keeps its own


def test_evaluate_gives_a_bf16_run_its_own_dev_metrics(glue, tmp_path) -> None:
    """A run trained and dev-evaluated under bf16 autocast is evaluated again in bf16 (run.json's
    precision), not in float32: the same Pearson to rounding, which float32 would miss."""
    training = adapter_training(glue, "stsb", learning_rate=1e-3, max_epochs=1, batch_size=16)
    run = train_task(glue, "stsb", "st-a", tmp_path / "bf16", reduction_factor=32,
                     train_config=replace(training, precision="bf16"))  # fmt: skip
    again = evaluate_run(glue, "stsb", run.out_dir)
    assert again == pytest.approx(run.dev_metrics, rel=1e-6)
    saved = json.loads((run.out_dir / "run.json").read_text())
    assert saved["train_config"]["precision"] == "bf16"


def test_evaluate_loads_the_base_in_the_dtype_the_run_trained_in(glue, tmp_path) -> None:
    """A run trained with `-o base_model_dtype=float16` was evaluated on the config's float32
    base (MSE 4.3214 against the run's 4.3216). run.json records the dtype and evaluate loads
    the base in it, unless the command line sets base_model_dtype; a run.json from before the
    record is evaluated in the config's, as it was."""
    half = replace(glue, base=replace(glue.base, dtype="float16"))
    training = adapter_training(half, "stsb", learning_rate=1e-3, max_epochs=1, batch_size=16)
    run = train_task(half, "stsb", "st-a", tmp_path / "fp16", reduction_factor=32,
                     train_config=training)  # fmt: skip
    saved = json.loads((run.out_dir / "run.json").read_text())
    assert saved["base_model_dtype"] == "float16"
    assert evaluate_run(glue, "stsb", run.out_dir) == pytest.approx(run.dev_metrics, rel=1e-6)
    full = evaluate_run(glue, "stsb", run.out_dir, overrides=["base_model_dtype=float32"])
    assert full["mse"] != pytest.approx(run.dev_metrics["mse"], rel=1e-6)
    del saved["base_model_dtype"]
    (run.out_dir / "run.json").write_text(json.dumps(saved))
    assert evaluate_run(glue, "stsb", run.out_dir) == pytest.approx(full, rel=1e-6)


def test_fusion_with_a_regression_target_and_a_regression_source(glue, adapters, tmp_path) -> None:
    dirs = [adapters[t].out_dir / "adapter" for t in ("stsb", "rte")]
    for target, metric in (("stsb", "pearson"), ("rte", "accuracy")):
        training = fusion_training(glue, target, learning_rate=1e-3, max_epochs=1)
        fusion = fuse_task(glue, target, dirs, tmp_path / target, train_config=training)
        assert fusion.lineage["adapters"] == ["stsb", "rte"]
        assert fusion.fit.best_metric == fusion.dev_metrics[metric]
        assert evaluate_run(glue, target, tmp_path / target) == pytest.approx(fusion.dev_metrics)


def test_predict_writes_a_number_per_row(glue, adapters, tmp_path) -> None:
    spec = glue.tasks["stsb"]
    rows = "sentence1\tsentence2\tid\nA cat sits.\tA cat is sitting.\tx1\nRain.\tA car.\tx2\n"
    (tmp_path / "in.tsv").write_text(rows)
    data = read_input(spec, tmp_path / "in.tsv")
    model = load_model(glue.base_model, "stsb", adapters["stsb"].out_dir)
    assert not model.training and not any(p.requires_grad for p in model.parameters())
    check_head(model, "stsb", spec)
    tokens = encode_input(data, spec, load_tokenizer(glue.base_model), glue.max_length)
    values = predict_probabilities(model, tokens, 8, 0, regression=True)
    assert values.shape == (2, 1)
    out = tmp_path / "out.jsonl"
    written = write_predictions(out, "jsonl", prediction_rows(data, values, [], regression=True))
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert written == 2 and [set(line) for line in lines] == [{"row", "id", "prediction"}] * 2
    assert [line["id"] for line in lines] == ["x1", "x2"]
    assert [line["prediction"] for line in lines] == pytest.approx(values.reshape(-1).tolist())
