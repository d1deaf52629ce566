"""A slice of the real CommonsenseQA (nested choices, answer letters) through ST-A training,
reloading, prediction from its original file, and a fusion over it and a source adapter. The
mechanics run on a tiny random BERT with the packaged MiniLM tokenizer (`tiny_model`); that a
loss goes down is shown with the packaged MiniLM itself (a random encoder knows no words to
tell the choices apart: its loss stays at ln 5 on this slice)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from tuning_support import write_tasks

from adapterfleet.config import PipelineConfig, load_config
from adapterfleet.orchestration.local import evaluate_run, fuse_task, train_task
from adapterfleet.training import TrainConfig

CSQA_FILE = (
    Path(__file__).resolve().parents[3] / "shared" / "data" / "csqa" / "dev_rand_split.jsonl"
)
pytestmark = pytest.mark.skipif(
    not CSQA_FILE.is_file(),
    reason=f"shared CommonsenseQA data not found at {CSQA_FILE} (it lives beside the repository)",
)
TRAIN = TrainConfig(
    learning_rate=1e-2, max_epochs=2, patience=None, batch_size=8, eval_batch_size=32, seed=0
)
CSQA = {
    "type": "multiple_choice",
    "train": {"path": str(CSQA_FILE), "rows": [0, 48]},
    "dev": {"path": str(CSQA_FILE), "rows": [1000, 1032]},
    "choices": {"context": ["question"], "list": "choices.text", "labels": "choices.label"},
    "label_field": "answerKey",
    "label_names": ["A", "B", "C", "D", "E"],
}


@pytest.fixture(scope="module")
def config(tmp_path_factory: pytest.TempPathFactory, tiny_model: Path) -> PipelineConfig:
    import yaml

    root = tmp_path_factory.mktemp("csqa")
    tasks = {"csqa": CSQA, "fruit": write_tasks(root / "data", train=48, dev=16)["fruit"]}
    document = {
        "name": "csqa-slice",
        "base_model": str(tiny_model),
        "max_length": 48,
        "storage": str(root / "runs"),
        "data_root": str(root / "data"),
        "tasks": tasks,
        "adapters": {"reduction_factors": [4], "learning_rates": [0.01], "seeds": [0]},
    }
    (root / "pipeline.yaml").write_text(yaml.safe_dump(document))
    return load_config(root / "pipeline.yaml")


@pytest.fixture(scope="module")
def st_a(config: PipelineConfig, tmp_path_factory: pytest.TempPathFactory):
    out = tmp_path_factory.mktemp("st-a")
    return train_task(config, "csqa", "st-a", out, reduction_factor=4, train_config=TRAIN)


@pytest.mark.slow
def test_st_a_on_minilm_learns_from_64_csqa_questions(config: PipelineConfig, tmp_path) -> None:
    """Measured: train loss 1.616, 1.531, 1.479, 1.467 over the four epochs (15 s here)."""
    import dataclasses

    spec = config.tasks["csqa"]
    spec = dataclasses.replace(spec, train=dataclasses.replace(spec.train, rows=(0, 64)))
    minilm = dataclasses.replace(
        config, base_model="minilm-l6", max_length=72, tasks={**config.tasks, "csqa": spec}
    )
    training = TrainConfig(learning_rate=1e-3, max_epochs=4, patience=None, batch_size=8)
    run = train_task(minilm, "csqa", "st-a", tmp_path, reduction_factor=16, train_config=training)
    losses = [epoch["train_loss"] for epoch in run.fit.history]
    assert losses[-1] < losses[0] - 0.08 and losses[-1] < 1.55, losses


def test_st_a_trains_a_multiple_choice_head(st_a) -> None:
    assert st_a.fit.epochs_run == TRAIN.max_epochs
    assert 0.0 <= st_a.dev_metrics["accuracy"] <= 1.0
    assert st_a.model.heads["csqa"].config.head_type == "multiple_choice"


def test_the_saved_run_reloads_to_the_same_dev_accuracy(config: PipelineConfig, st_a) -> None:
    again = evaluate_run(config, "csqa", st_a.out_dir)
    assert again["accuracy"] == pytest.approx(st_a.dev_metrics["accuracy"])


def test_predict_reads_the_original_file_and_names_the_answer_letters(
    config: PipelineConfig, st_a
) -> None:
    from adapterfleet.adapters import load_tokenizer
    from adapterfleet.data.prediction_input import encode_input, read_input
    from adapterfleet.orchestration.predict import label_names_of, prediction_rows
    from adapterfleet.training.predict import predict_probabilities

    spec = config.tasks["csqa"]
    data = read_input(spec, CSQA_FILE)
    assert len(data) == 1221 and data.id_field == "id"
    assert data.texts[0][0].startswith("A revolving door") and len(data.texts[0]) == 6
    tokenizer = load_tokenizer(config.base_model)
    rows = encode_input(data, spec, tokenizer, config.max_length)
    probabilities = predict_probabilities(st_a.model, rows, 64, tokenizer.pad_token_id)
    assert probabilities.shape == (1221, 5)
    predicted = list(prediction_rows(data, probabilities, label_names_of(spec)))
    assert {row["prediction"] for row in predicted} <= set("ABCDE")
    assert set(predicted[0]) == {"row", "id", "prediction", *(f"prob_{x}" for x in "ABCDE")}
    answers = [line.split('"answerKey": "')[1][0] for line in CSQA_FILE.read_text().splitlines()]
    right = [row["prediction"] == answers[row["row"]] for row in predicted[1000:1032]]
    assert sum(right) / len(right) == pytest.approx(st_a.dev_metrics["accuracy"])


def _predicted(config: PipelineConfig, st_a, path: Path) -> list[dict]:
    from adapterfleet.adapters import load_tokenizer
    from adapterfleet.data.prediction_input import encode_input, read_input
    from adapterfleet.orchestration.predict import label_names_of, prediction_rows
    from adapterfleet.training.predict import predict_probabilities

    spec = config.tasks["csqa"]
    data = read_input(spec, path)
    tokenizer = load_tokenizer(config.base_model)
    rows = encode_input(data, spec, tokenizer, config.max_length)
    probabilities = predict_probabilities(st_a.model, rows, 64, tokenizer.pad_token_id)
    return list(prediction_rows(data, probabilities, label_names_of(spec)))


def test_predict_names_each_choice_by_its_rows_own_label_as_evaluate_does(
    config: PipelineConfig, st_a, tmp_path
) -> None:
    """Every other question with its (label, choice) pairs in reverse order, E first (the
    shared file's rows all hold A..E in order): each label keeps its probability and the
    prediction its letter, and evaluate counts a row right exactly where predict names its
    answerKey. It named the choices by position: a reversed row's prob_A was choice E's."""
    records = [json.loads(line) for line in CSQA_FILE.read_text().splitlines()[1000:1032]]
    turned = [dict(r) for r in records]
    for record in turned[1::2]:
        pairs = list(zip(record["choices"]["label"], record["choices"]["text"], strict=True))
        record["choices"] = {
            "label": [p[0] for p in pairs[::-1]],
            "text": [p[1] for p in pairs[::-1]],
        }
    for name, rows in (("plain", records), ("turned", turned)):
        (tmp_path / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    plain = _predicted(config, st_a, tmp_path / "plain.jsonl")
    again = _predicted(config, st_a, tmp_path / "turned.jsonl")
    for before, after in zip(plain, again, strict=True):
        assert after["prediction"] == before["prediction"], (before, after)
        for letter in "ABCDE":
            assert after[f"prob_{letter}"] == pytest.approx(before[f"prob_{letter}"], abs=1e-5)
    assert any(row["prediction"] != "E" for row in again[1::2])  # not all at one position
    spec = config.tasks["csqa"]
    dev = dataclasses.replace(spec.dev, path=tmp_path / "turned.jsonl", rows=None)
    tasks = {**config.tasks, "csqa": dataclasses.replace(spec, dev=dev)}
    accuracy = evaluate_run(dataclasses.replace(config, tasks=tasks), "csqa", st_a.out_dir)
    right = [row["prediction"] == r["answerKey"] for row, r in zip(again, turned, strict=True)]
    assert accuracy["accuracy"] == pytest.approx(sum(right) / len(right))


def test_fusion_over_csqa_and_a_source_adapter(config: PipelineConfig, st_a, tmp_path) -> None:
    source = train_task(config, "fruit", "st-a", tmp_path / "fruit", reduction_factor=4)
    fusion = fuse_task(
        config,
        "csqa",
        [st_a.out_dir / "adapter", source.out_dir / "adapter"],
        tmp_path / "fusion",
        train_config=TrainConfig(learning_rate=1e-2, max_epochs=2, batch_size=8, patience=None),
    )
    assert fusion.lineage["adapters"] == ["csqa", "fruit"]
    assert fusion.fit.epochs_run == 2 and 0.0 <= fusion.dev_metrics["accuracy"] <= 1.0
    again = evaluate_run(config, "csqa", tmp_path / "fusion")
    assert again["accuracy"] == pytest.approx(fusion.dev_metrics["accuracy"])
