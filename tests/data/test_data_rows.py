"""`rows: [start, stop]`: one file gives a task its train and its dev rows (data/slices.py), and
the real CommonsenseQA dev file declared that way in configs/csqa.yaml."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from datatest_support import REPO

from adapterfleet.data import TaskError, TaskSpec, load_task, load_tasks_config, tokenize_task

CSQA_FILE = REPO.parent / "shared" / "data" / "csqa" / "dev_rand_split.jsonl"
needs_csqa = pytest.mark.skipif(
    not CSQA_FILE.is_file(),
    reason=f"shared CommonsenseQA data not found at {CSQA_FILE} (it lives beside the repository)",
)


def _file(tmp_path: Path, count: int = 10) -> None:
    lines = ["text\tlabel"] + [f"row {i}\t{'yes' if i % 2 else 'no'}" for i in range(count)]
    (tmp_path / "all.tsv").write_text("\n".join(lines) + "\n")


def _spec(train_rows: list | None, dev_rows: list | None) -> dict:
    spec = {"text_fields": ["text"], "label_names": ["no", "yes"]}
    return spec | {
        "train": {"path": "all.tsv", "rows": train_rows},
        "dev": {"path": "all.tsv", "rows": dev_rows},
    }


def test_rows_slice_one_file_into_train_and_dev(tmp_path: Path, write_config) -> None:
    _file(tmp_path)
    spec = load_tasks_config(write_config({"t": _spec([0, 7], [7, None])}))["t"]
    assert spec.train.rows == (0, 7) and spec.dev.rows == (7, None)
    task = load_task(spec)
    assert task.train["text_a"] == [f"row {i}" for i in range(7)]
    assert task.dev["text_a"] == ["row 7", "row 8", "row 9"]
    assert TaskSpec.from_mapping("t", spec.to_mapping(), tmp_path) == spec


def test_an_error_names_the_record_in_the_file_not_in_the_slice(
    tmp_path: Path, write_config
) -> None:
    _file(tmp_path)
    text = (tmp_path / "all.tsv").read_text().replace("row 8\tno", "row 8\tmaybe")
    (tmp_path / "all.tsv").write_text(text)
    with pytest.raises(TaskError, match=r"unknown label value 'maybe' \(record 9 of"):
        load_task(load_tasks_config(write_config({"t": _spec([0, 7], [7, 10])}))["t"])


@pytest.mark.parametrize(
    ("train", "dev", "message"),
    [
        ([0, 8], [7, None], r"dev.rows: dev rows \[7, None\] overlap train rows \[0, 8\]"),
        ([0, 8], None, "overlap"),
        ([5, 5], [0, 5], r"train.rows: expected a row range, got \[5, 5\]"),
        ([-1, 5], [5, None], "train.rows: expected a row range"),
        ([0, 5, 7], [7, None], "train.rows: expected a row range"),
        ([0, True], [7, None], "train.rows: expected a row range"),
    ],
)
def test_bad_or_overlapping_rows_are_refused_at_config_validation(
    tmp_path: Path, write_config, train, dev, message
) -> None:
    with pytest.raises(TaskError, match=message):
        load_tasks_config(write_config({"t": _spec(train, dev)}))


def test_rows_past_the_end_of_the_file_are_refused(tmp_path: Path, write_config) -> None:
    _file(tmp_path)
    spec = load_tasks_config(write_config({"t": _spec([0, 7], [7, 12])}))["t"]
    with pytest.raises(TaskError, match=r"dev.rows: \[7, 12\] asks for records past the 10"):
        load_task(spec)


def test_rows_count_malformed_records_in_place_and_each_slice_only_its_own(
    tmp_path: Path, write_config
) -> None:
    """Three malformed lines inside the train rows: the slices keep the file's record
    positions, and the dev slice, which holds none of them, is not charged with them."""
    lines = ["text\tlabel"]
    for i in range(10):
        lines.append(f"row {i}\t{'yes' if i % 2 else 'no'}" if i not in (2, 4, 5) else "broken")
    (tmp_path / "all.tsv").write_text("\n".join(lines) + "\n")
    spec = _spec([0, 7], [7, None]) | {"max_skipped_fraction": 0.5}
    task = load_task(load_tasks_config(write_config({"t": spec}))["t"])
    assert task.train["text_a"] == ["row 0", "row 1", "row 3", "row 6"]
    assert task.dev["text_a"] == ["row 7", "row 8", "row 9"]
    assert task.skipped_by_split == {"train": 3, "dev": 0}
    strict = _spec([0, 7], [7, None]) | {"max_skipped_fraction": 0.1}
    with pytest.raises(TaskError, match=r"train: 3 of 7 records .* lines 4, 6, 7\)"):
        load_task(load_tasks_config(write_config({"t": strict}))["t"])


def test_rows_also_slice_a_held_out_dev_fraction(tmp_path: Path, write_config) -> None:
    _file(tmp_path)
    spec = {"text_fields": ["text"], "label_names": ["no", "yes"], "dev_fraction": 0.5}
    spec["train"] = {"path": "all.tsv", "rows": [2, 10]}  # 4 training rows: both labels
    task = load_task(load_tasks_config(write_config({"t": spec}))["t"])
    held = sorted([*task.train["text_a"], *task.dev["text_a"]])
    assert held == sorted(f"row {i}" for i in range(2, 10))


@needs_csqa
def test_commonsenseqa_dev_file_as_configs_csqa_declares_it(tokenizer, tmp_path: Path) -> None:
    from adapterfleet.config import load_config

    task = load_task(load_config(REPO / "configs" / "csqa.yaml").tasks["csqa"])
    records = [json.loads(line) for line in CSQA_FILE.read_text().splitlines()]
    assert (len(task.train), len(task.dev), task.skipped) == (1000, 221, 0)
    for split, offset in ((task.train, 0), (task.dev, 1000)):
        for index in (0, len(split) - 1):
            record = records[offset + index]
            assert split[index]["question"] == record["question"]
            assert split[index]["choices"] == record["choices"]["text"]
            assert split[index]["label"] == "ABCDE".index(record["answerKey"])
    assert set(task.train["label"]) == set(range(5))
    tokens = tokenize_task(task, tokenizer, 72, tmp_path / "tokens")
    assert {len(row) for row in tokens.dev.input_ids} == {5}
