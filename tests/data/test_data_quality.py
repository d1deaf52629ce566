"""Bad data is refused, not trained on (issue #22, data/quality.py): a text cell that is not text,
a column the task reads given twice, too many skipped rows, a training split with one label.
Empty text cells skip their row. Each refusal is one `TaskError` line naming task, field, row."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from adapterfleet.data import TaskError, load_task, load_tasks_config

SINGLE = {"text_fields": ["text"], "label_names": ["no", "yes"]}


def _jsonl(path: Path, records: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


def _records(count: int = 20) -> list[dict[str, Any]]:
    return [{"text": f"row {i}", "label": ["no", "yes"][i % 2]} for i in range(count)]


def _load(write_config, spec: dict[str, Any]) -> Any:
    return load_task(load_tasks_config(write_config({"t": {**SINGLE, **spec}}))["t"])


def _refusal(write_config, spec: dict[str, Any]) -> str:
    with pytest.raises(TaskError) as info:
        _load(write_config, spec)
    message = str(info.value)
    assert "\n" not in message and message.startswith("task 't', "), message
    return message


# ------------------------------------------------------------------ a text cell holds text


@pytest.mark.parametrize(
    ("value", "kind"),
    [
        (["a", "b"], "a list (['a', 'b'])"),
        ({"x": 1}, "a mapping ({'x': 1})"),
        (42, "a number (42)"),
        (0.5, "a number (0.5)"),
        (True, "a boolean (True)"),
    ],
)
def test_a_text_cell_that_is_not_text_is_refused_with_its_record(
    value: Any, kind: str, tmp_path: Path, write_config
) -> None:
    records = _records()
    records[6]["text"] = value
    _jsonl(tmp_path / "d.jsonl", records)
    message = _refusal(write_config, {"train": "d.jsonl", "dev": "d.jsonl"})
    assert f"train column 'text' (text_fields): holds {kind}, not text (record 7 of " in message
    assert "d.jsonl); name a column of text" in message


def test_a_numeric_column_named_as_text_field_is_refused(tmp_path: Path, write_config) -> None:
    """A Parquet file (or a Hugging Face dataset) whose `idx` column is an integer column."""
    records = [{"idx": i, **r} for i, r in enumerate(_records())]
    pq.write_table(pa.Table.from_pylist(records), tmp_path / "d.parquet")
    spec = {"train": "d.parquet", "dev": "d.parquet", "text_fields": ["idx"]}
    message = _refusal(write_config, spec)
    assert "train column 'idx' (text_fields): holds a number (0), not text (record 1 of" in message
    assert "or write the value as a string in the file if it is text" in message


def test_a_numeric_column_of_a_hub_dataset_is_refused(tmp_path: Path, write_config) -> None:
    import datasets

    table = datasets.Dataset.from_dict({"idx": [1, 2], "text": ["a", "b"], "label": [0, 1]})
    datasets.DatasetDict({"train": table, "validation": table}).save_to_disk(tmp_path / "hub")
    message = _refusal(write_config, {"hub": "hub", "train": "train", "dev": "validation",
                                      "text_fields": ["idx", "text"]})  # fmt: skip
    assert "train column 'idx' (text_fields): holds a number (1), not text (record 1" in message


def test_numbers_as_text_in_a_tsv_are_text(tmp_path: Path, write_config) -> None:
    """A delimited file holds text only: a cell reading `42` is the text "42"."""
    lines = ["text\tlabel"] + [f"{i}\t{['no', 'yes'][i % 2]}" for i in range(4)]
    (tmp_path / "d.tsv").write_text("\n".join(lines) + "\n")
    task = _load(write_config, {"train": "d.tsv", "dev": "d.tsv"})
    assert task.train["text_a"] == ["0", "1", "2", "3"]


def test_a_choice_may_be_a_number_a_context_may_not(tmp_path: Path, write_config) -> None:
    rows = [
        {"q": "Legs of a spider?", "options": [6, 8], "answer": 1},
        {"q": "Legs of an ant?", "options": [6, 8.0], "answer": 0},
    ]
    _jsonl(tmp_path / "mc.jsonl", rows)
    spec = {"type": "multiple_choice", "train": "mc.jsonl", "dev": "mc.jsonl"}
    spec |= {"choices": {"context": "q", "list": "options"}, "label_field": "answer"}
    spec |= {"label_names": ["0", "1"]}
    tasks = {"t": spec}
    task = load_task(load_tasks_config(write_config(tasks))["t"])
    assert task.train["choices"] == [["6", "8"], ["6", "8"]]
    _jsonl(tmp_path / "mc.jsonl", [*rows, {"q": ["Legs?"], "options": [1, 2], "answer": 0}])
    with pytest.raises(TaskError, match=r"train column 'q' \(choices.context\): holds a list"):
        load_task(load_tasks_config(write_config(tasks))["t"])


# ---------------------------------------------------------------- a column read appears once


def test_a_column_the_task_reads_given_twice_in_a_header(tmp_path: Path, write_config) -> None:
    lines = ["text\tlabel\ttext"] + [f"a {i}\t{['no', 'yes'][i % 2]}\tb {i}" for i in range(4)]
    (tmp_path / "d.tsv").write_text("\n".join(lines) + "\n")
    message = _refusal(write_config, {"train": "d.tsv", "dev": "d.tsv"})
    assert "train column 'text' (text_fields): appears twice in " in message
    assert "d.tsv (header line 1); only one would be read; give each column its own" in message


def test_a_repeated_column_the_task_does_not_read_is_harmless(tmp_path: Path, write_config) -> None:
    lines = ["note\ttext\tlabel\tnote"] + [f"x\ta {i}\t{['no', 'yes'][i % 2]}\ty" for i in range(4)]
    (tmp_path / "d.tsv").write_text("\n".join(lines) + "\n")
    assert len(_load(write_config, {"train": "d.tsv", "dev": "d.tsv"}).train) == 4


def test_a_json_record_with_a_key_twice(tmp_path: Path, write_config) -> None:
    good = [json.dumps(r) for r in _records(4)]
    good[2] = '{"text": "first", "label": "no", "label": "yes"}'
    (tmp_path / "d.jsonl").write_text("\n".join(good) + "\n")
    message = _refusal(write_config, {"train": "d.jsonl", "dev": "d.jsonl"})
    assert "train column 'label' (label_field): appears twice in" in message
    assert "(line 3)" in message


def test_a_rename_onto_a_column_the_file_has(tmp_path: Path, write_config) -> None:
    _jsonl(tmp_path / "d.jsonl", [{"sentence": "s", **r} for r in _records(4)])
    spec = {"train": {"path": "d.jsonl", "rename": {"sentence": "text"}}, "dev": "d.jsonl"}
    message = _refusal(write_config, spec)
    assert (
        "train.rename: 'sentence' -> 'text', but " in message
        and "has a column 'text' too" in message
    )


# ------------------------------------------------------------ empty cells, skipped rows


def test_empty_text_cells_skip_their_rows_and_are_counted(tmp_path: Path, write_config) -> None:
    records = _records(20)
    records[3]["text"] = ""
    records[8]["text"] = "   "
    _jsonl(tmp_path / "d.jsonl", records)
    task = _load(write_config, {"train": "d.jsonl", "dev": "d.jsonl"})
    assert len(task.train) == 18 and task.skipped_by_split == {"train": 2, "dev": 2}
    assert "row 3" not in task.train["text_a"]


@pytest.mark.parametrize("suffix", ["tsv", "csv", "jsonl"])
def test_an_empty_label_cell_skips_its_row_in_every_format(
    suffix: str, tmp_path: Path, write_config
) -> None:
    """CSV and TSV leave a missing label as an empty cell, JSON lines as null: the same row,
    skipped and counted either way (an empty cell was an "unknown label value ''" before)."""
    records: list[dict[str, Any]] = _records(20)
    records[4]["label"] = None if suffix == "jsonl" else ""
    records[9]["label"] = None if suffix == "jsonl" else "  "
    if suffix == "jsonl":
        _jsonl(tmp_path / "d.jsonl", records)
    else:
        sep = "\t" if suffix == "tsv" else ","
        lines = ["text" + sep + "label"] + [r["text"] + sep + r["label"] for r in records]
        (tmp_path / f"d.{suffix}").write_text("\n".join(lines) + "\n")
    task = _load(write_config, {"train": f"d.{suffix}", "dev": f"d.{suffix}"})
    assert len(task.train) == 18 and task.skipped_by_split == {"train": 2, "dev": 2}
    assert "row 4" not in task.train["text_a"] and "row 9" not in task.train["text_a"]


def test_an_empty_regression_label_or_answer_skips_its_row(tmp_path: Path, write_config) -> None:
    lines = ["text,score"] + [f"pair {i},{i % 5}" for i in range(19)] + ["pair 19,"]
    (tmp_path / "r.csv").write_text("\n".join(lines) + "\n")
    spec = {"type": "regression", "text_fields": ["text"], "label_field": "score"}
    config = write_config({"r": {**spec, "train": "r.csv", "dev": "r.csv"}})
    task = load_task(load_tasks_config(config)["r"])
    assert len(task.train) == 19 and task.skipped_by_split == {"train": 1, "dev": 1}
    lines = ["q,a,b,answer"] + [f"q{i},yes,no,{'AB'[i % 2]}" for i in range(19)] + ["q19,yes,no,"]
    (tmp_path / "m.csv").write_text("\n".join(lines) + "\n")
    spec = {"type": "multiple_choice", "choices": {"context": ["q"], "fields": ["a", "b"]}}
    spec |= {"label_field": "answer", "label_names": ["A", "B"]}
    config = write_config({"m": {**spec, "train": "m.csv", "dev": "m.csv"}})
    task = load_task(load_tasks_config(config)["m"])
    assert len(task.train) == 19 and task.skipped_by_split == {"train": 1, "dev": 1}


def test_a_split_mostly_malformed_is_refused_with_the_count(tmp_path: Path, write_config) -> None:
    """A CSV read as TSV-like rows of the wrong width: 8 of 10 records are skipped."""
    lines = ["text\tlabel", "good one\tyes", "good two\tno"]
    lines += [f"bad {i}\tyes\textra" for i in range(7)] + ["\tno"]
    (tmp_path / "d.tsv").write_text("\n".join(lines) + "\n")
    (tmp_path / "dev.tsv").write_text("text\tlabel\na\tyes\nb\tno\n")
    message = _refusal(write_config, {"train": "d.tsv", "dev": "dev.tsv"})
    assert "task 't', train: 8 of 10 records of " in message and "(80%) were skipped" in message
    assert "malformed at lines 4, 5, 6, 7, 8, ..." in message
    assert "a value missing or empty in record 3" in message
    assert "more than max_skipped_fraction 0.1 is refused" in message
    assert "or raise max_skipped_fraction" in message
    lenient = _load(write_config, {"train": "d.tsv", "dev": "dev.tsv", "max_skipped_fraction": 0.9})
    assert len(lenient.train) == 2 and lenient.skipped_by_split["train"] == 8


def test_a_few_malformed_rows_are_still_skipped(tmp_path: Path, write_config) -> None:
    lines = ["text\tlabel"] + [f"r {i}\t{['no', 'yes'][i % 2]}" for i in range(19)] + ["x"]
    (tmp_path / "d.tsv").write_text("\n".join(lines) + "\n")
    task = _load(write_config, {"train": "d.tsv", "dev": "d.tsv"})
    assert len(task.train) == 19 and task.skipped_by_split["train"] == 1  # 5%: under 0.1


@pytest.mark.parametrize("value", [-0.1, 1.5, "half", True, [0.1]])
def test_max_skipped_fraction_is_a_fraction(value: Any, tmp_path: Path, write_config) -> None:
    spec = {**SINGLE, "train": "d.tsv", "dev": "d.tsv", "max_skipped_fraction": value}
    with pytest.raises(TaskError, match=r"task 't', max_skipped_fraction: .* in \[0, 1\]"):
        load_tasks_config(write_config({"t": spec}))


# ------------------------------------------------------------------ two labels or more


def test_a_training_split_with_one_label_is_refused(tmp_path: Path, write_config) -> None:
    _jsonl(tmp_path / "train.jsonl", [{"text": f"r {i}", "label": "yes"} for i in range(5)])
    _jsonl(tmp_path / "dev.jsonl", _records(4))
    message = _refusal(write_config, {"train": "train.jsonl", "dev": "dev.jsonl"})
    assert "train 'label': all 5 training rows have the label 'yes'" in message
    assert "a model learns nothing from one; check label_field" in message


def test_a_dev_split_with_one_label_is_fine(tmp_path: Path, write_config) -> None:
    _jsonl(tmp_path / "train.jsonl", _records(4))
    _jsonl(tmp_path / "dev.jsonl", [{"text": "r", "label": "yes"}])
    assert len(_load(write_config, {"train": "train.jsonl", "dev": "dev.jsonl"}).dev) == 1


def test_a_regression_task_with_one_value_is_refused(tmp_path: Path, write_config) -> None:
    _jsonl(tmp_path / "d.jsonl", [{"text": f"r {i}", "score": 2.5} for i in range(4)])
    spec = {"type": "regression", "train": "d.jsonl", "dev": "d.jsonl", "label_field": "score"}
    tasks = {"t": {"text_fields": ["text"], **spec}}
    with pytest.raises(TaskError, match=r"train 'score': all 4 training rows have the label "
                                        r"value 2.5"):  # fmt: skip
        load_task(load_tasks_config(write_config(tasks))["t"])


# ------------------------------------------------------------------ dev rows copied from train
def test_dev_rows_copied_from_train_are_said_with_count_share_and_records(
    tmp_path: Path, write_config, caplog
) -> None:
    """Only dev given as the train file was said; train rows copied into a dev file of its own
    were scored as unseen data without a word. A row of the same text under another label, or
    a dev without copies, says nothing."""
    train = _records(20)
    dev = [{"text": f"dev {i}", "label": ["no", "yes"][i % 2]} for i in range(12)]
    dev[2], dev[5] = dict(train[3]), dict(train[10])
    dev[6] = {"text": "row 7", "label": "no"}  # train's 'row 7' is 'yes': not a copy
    dev.insert(1, {"text": "", "label": "no"})  # skipped: the records after it count on
    _jsonl(tmp_path / "train.jsonl", train)
    _jsonl(tmp_path / "dev.jsonl", dev)
    with caplog.at_level("WARNING", logger="adapterfleet.data.loading"):
        _load(write_config, {"train": "train.jsonl", "dev": "dev.jsonl"})
    said = [r.getMessage() for r in caplog.records if "also in train" in r.getMessage()]
    assert said == [
        "task 't': 2 of 12 dev rows (16.7%) are also in train, the same texts and label (dev "
        "records 4 and 7): the dev metric scores them as seen data; drop them from dev for a "
        "score of unseen rows"
    ]
    caplog.clear()
    _jsonl(tmp_path / "dev.jsonl", [r for i, r in enumerate(dev) if i not in (3, 6)])
    with caplog.at_level("WARNING", logger="adapterfleet.data.loading"):
        _load(write_config, {"train": "train.jsonl", "dev": "dev.jsonl"})
    assert not [r for r in caplog.records if "also in train" in r.getMessage()]


def test_dev_rows_copied_from_train_are_counted_among_the_rows_the_task_uses(
    tmp_path: Path, write_config, caplog
) -> None:
    """Counted on the whole files, before max_train_examples and max_dev_examples: a task
    scoring 100 dev rows was told that 12 of 1500 dev rows were seen data, though none of
    the rows it used were."""
    train = _records(20)
    dev = [dict(train[i]) for i in range(10)] + [
        {"text": f"d{i}", "label": "no"} for i in range(30)
    ]
    _jsonl(tmp_path / "train.jsonl", train)
    _jsonl(tmp_path / "dev.jsonl", dev)
    spec = {"train": "train.jsonl", "dev": "dev.jsonl", "max_dev_examples": 8}
    with caplog.at_level("WARNING", logger="adapterfleet.data.loading"):
        data = _load(write_config, spec)
    said = [r.getMessage() for r in caplog.records if "also in train" in r.getMessage()]
    copies = sum(text.startswith("row") for text in data.dev["text_a"])
    if copies:
        assert len(said) == 1 and said[0].startswith(f"task 't': {copies} of 8 dev rows"), said
    else:
        assert said == [], said
    assert len(data.dev) == 8
