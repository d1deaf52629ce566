"""`type: regression`: the declaration (range, no label names), number labels, their refusals,
the tokenised cache and batches of numbers, and STS-B from the shared GLUE folder."""

from __future__ import annotations

from pathlib import Path
from statistics import pvariance

import pytest
import torch
from datatest_support import GLUE_CONFIG, needs_glue

from adapterfleet.data import (
    PadCollator,
    TaskError,
    TaskSpec,
    load_task,
    load_tasks_config,
    tokenize_task,
)
from adapterfleet.data.baseline import DevMean, dev_chance

SPEC = {
    "type": "regression",
    "train": "train.tsv",
    "dev": "dev.tsv",
    "text_fields": ["s1", "s2"],
    "label_field": "score",
}
ROWS = "s1\ts2\tscore\nA cat.\tA cat.\t5.0\nA cat.\tA dog.\t1.5\nRain.\tSun.\t0\n"


def _error(mapping: dict) -> str:
    with pytest.raises(TaskError) as info:
        TaskSpec.from_mapping("sts", mapping, Path("/data"))
    message = str(info.value)
    assert "\n" not in message and message.startswith("task 'sts', ")
    return message


def test_regression_spec_range_metrics_and_round_trip() -> None:
    spec = TaskSpec.from_mapping("sts", {**SPEC, "range": [0, 5]}, Path("/data"))
    assert spec.is_regression and spec.label_names == () and spec.value_range == (0.0, 5.0)
    assert spec.metrics == ("pearson", "spearman", "mse")
    again = TaskSpec.from_mapping("sts", spec.to_mapping(), Path("/"))
    assert again == spec
    plain = TaskSpec.from_mapping("sts", SPEC, Path("/data"))
    assert plain.value_range is None and "range" not in plain.to_mapping()


def test_a_null_range_is_no_range() -> None:
    """`range: null`, which `-o tasks.sts.range=null` writes to take a range away, was refused
    with "leave it out", which `-o` cannot do."""
    spec = TaskSpec.from_mapping("sts", {**SPEC, "range": None}, Path("/data"))
    assert spec.is_regression and spec.value_range is None


@pytest.mark.parametrize("bad", [[5, 0], [1, 1], [1], "0-5", [0, "x"], [True, 2], [0, ".nan"]])
def test_a_range_that_is_not_two_increasing_numbers_is_refused(bad: object) -> None:
    message = _error({**SPEC, "range": bad})
    assert "range: expected two increasing numbers [low, high]" in message
    assert "e.g. range: [0, 5]" in message


@pytest.mark.parametrize(
    ("change", "field", "fix"),
    [
        ({"label_names": ["0", "1"]}, "label_names", "not for type regression; remove it"),
        ({"type": "classification", "label_names": ["a", "b"], "range": [0, 1]}, "range", ""),
        ({"question_field": "q"}, "question_field", "use text_fields"),
    ],
)
def test_keys_that_do_not_fit_regression_are_refused(change: dict, field: str, fix: str) -> None:
    message = _error({**SPEC, **change})
    assert f", {field}: " in message and fix in message


def _task(tmp_path: Path, write_config, train: str = ROWS, **extra: object):
    (tmp_path / "train.tsv").write_text(train)
    (tmp_path / "dev.tsv").write_text(ROWS)
    return load_tasks_config(write_config({"sts": {**SPEC, **extra}}))["sts"]


def test_labels_are_numbers_through_load_cache_and_batches(
    tmp_path: Path, write_config, tokenizer
) -> None:
    data = load_task(_task(tmp_path, write_config, range=[0, 5]))
    assert list(data.train["label"]) == [5.0, 1.5, 0.0]
    assert data.train.features["label"].dtype == "float64"
    tokenized = tokenize_task(data, tokenizer, 32, tmp_path / "cache")
    assert tokenized.is_regression and tokenized.value_range == (0.0, 5.0)
    assert tokenized.train.labels == [5.0, 1.5, 0.0]
    again = tokenize_task(data, tokenizer, 32, tmp_path / "cache")
    assert again.from_cache and again.dev.labels == [5.0, 1.5, 0.0]
    assert dev_chance(again) == DevMean(6.5 / 3, pvariance([5.0, 1.5, 0.0]))  # what the mean scores
    batch = PadCollator(tokenizer.pad_token_id)([tokenized.train[i] for i in range(3)])
    assert batch["labels"].dtype == torch.float32
    assert batch["labels"].tolist() == [5.0, 1.5, 0.0]


def test_a_label_that_is_not_a_number_names_the_record_and_value(
    tmp_path: Path, write_config
) -> None:
    spec = _task(tmp_path, write_config, train=ROWS + "Snow.\tIce.\thigh\n")
    with pytest.raises(TaskError) as info:
        load_task(spec)
    message = str(info.value)
    assert message.startswith("task 'sts', train 'score': 'high' is not a number (record 4 of ")
    assert "a regression label is a number; fix the row or label_field" in message


@pytest.mark.parametrize("score", ["0_5", "1_000", " 2_5 "])
def test_a_label_with_an_underscore_is_not_a_number(
    tmp_path: Path, write_config, score: str
) -> None:
    """Python's `float` reads digit grouping (`0_5` as 5.0); nobody writes a score so."""
    spec = _task(tmp_path, write_config, train=ROWS + f"Snow.\tIce.\t{score}\n")
    with pytest.raises(TaskError) as info:
        load_task(spec)
    message = str(info.value)
    assert message.startswith(f"task 'sts', train 'score': {score!r} is not a number (record 4 of ")


def test_a_json_integer_past_floats_range_is_not_a_number(tmp_path: Path, write_config) -> None:
    lines = [f'{{"s1": "A cat.", "s2": "A dog.", "score": {v}}}' for v in ("1.5", "1" + "0" * 400)]
    (tmp_path / "train.jsonl").write_text("\n".join(lines) + "\n")
    (tmp_path / "dev.tsv").write_text(ROWS)
    spec = load_tasks_config(write_config({"sts": {**SPEC, "train": "train.jsonl"}}))["sts"]
    with pytest.raises(TaskError) as info:
        load_task(spec)
    message = str(info.value)
    assert "\n" not in message and len(message) < 300
    assert "train 'score': 1000000000000000000000000000000000000... is not a number" in message
    assert "(record 2 of" in message and "fix the row or label_field" in message


def test_a_label_outside_the_range_is_refused(tmp_path: Path, write_config) -> None:
    spec = _task(tmp_path, write_config, train=ROWS + "Snow.\tIce.\t7.5\n", range=[0, 5])
    with pytest.raises(TaskError, match=r"7\.5 is outside range \[0, 5\].*widen range"):
        load_task(spec)


def test_a_dev_split_of_one_value_is_refused(tmp_path: Path, write_config) -> None:
    """Every dev score 2.0: `train` went on, Pearson and Spearman 0.0000 each epoch (the best
    epoch the first, its MSE the worse), without a word; `tasks` showed `mean 2 (MSE 0)`."""
    spec = _task(tmp_path, write_config)
    (tmp_path / "dev.tsv").write_text("s1\ts2\tscore\nA.\tB.\t2\nC.\tD.\t2.0\n")
    with pytest.raises(TaskError) as info:
        load_task(spec)
    assert str(info.value) == (
        "task 'sts', dev 'score': all 2 dev rows have the label value 2; no correlation can be "
        "measured on one value, and answering it always scores an MSE of 0; give dev rows of "
        "several values (max_dev_examples or dev_fraction may have left one)"
    )


@needs_glue
def test_stsb_from_the_shared_glue_folder() -> None:
    spec = load_tasks_config(GLUE_CONFIG)["stsb"]
    assert spec.is_regression and spec.value_range == (0.0, 5.0) and spec.is_pair
    data = load_task(spec)
    assert (len(data.train), len(data.dev)) == (4249, 1500)
    assert data.skipped == 0
    first = data.train[0]
    assert (first["text_a"], first["text_b"], first["label"]) == (
        "A plane is taking off.",
        "An air plane is taking off.",
        5.0,
    )
    scores = list(data.train["label"]) + list(data.dev["label"])
    assert min(scores) == 0.0 and max(scores) == 5.0 and len(set(scores)) > 100
