"""Every load error is one `TaskError` line naming the task, the field and the fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from adapterfleet.data import TaskError, load_task, load_tasks_config

SPEC = {
    "train": "train.tsv",
    "dev": "dev.tsv",
    "text_fields": ["sentence1", "sentence2"],
    "label_names": ["entailment", "not_entailment"],
}
GOOD = (
    "index\tsentence1\tsentence2\tlabel\n"
    "0\tA cat.\tAn animal.\tentailment\n"
    "1\tA dog.\tA fish.\tnot_entailment\n"
)


def _load_error(tmp_path: Path, write_config, spec: dict, train: str | bytes = GOOD) -> str:
    target = tmp_path / "train.tsv"
    target.write_bytes(train if isinstance(train, bytes) else train.encode())
    (tmp_path / "dev.tsv").write_text(GOOD)
    specs = load_tasks_config(write_config({"rte": spec}))
    with pytest.raises(TaskError) as info:
        load_task(specs["rte"])
    message = str(info.value)
    assert "\n" not in message and message.startswith("task 'rte', ")
    assert isinstance(info.value, ValueError) and info.value.task == "rte"
    return message


def test_missing_file_gives_the_path(tmp_path: Path, write_config) -> None:
    message = _load_error(tmp_path, write_config, {**SPEC, "dev": "nowhere/dev.tsv"})
    assert "dev.path: file not found" in message
    assert str(tmp_path / "nowhere" / "dev.tsv") in message


def test_missing_column_lists_the_columns(tmp_path: Path, write_config) -> None:
    message = _load_error(tmp_path, write_config, {**SPEC, "text_fields": ["sentence1", "s2"]})
    assert "train column 's2' (text_fields): not found in" in message
    assert "columns there: index, sentence1, sentence2, label" in message


def test_missing_label_column(tmp_path: Path, write_config) -> None:
    message = _load_error(tmp_path, write_config, {**SPEC, "label_field": "gold"})
    assert "column 'gold' (label_field)" in message and "label" in message


def test_unknown_label_value_lists_label_names(tmp_path: Path, write_config) -> None:
    bad = GOOD + "1\tB.\tC.\tneutral\n"
    message = _load_error(tmp_path, write_config, SPEC, bad)
    assert "train 'label': unknown label value 'neutral'" in message
    assert "['entailment', 'not_entailment']" in message


def test_label_index_out_of_range(tmp_path: Path, write_config) -> None:
    message = _load_error(tmp_path, write_config, SPEC, GOOD + "1\tB.\tC.\t2\n")
    assert "unknown label value '2'" in message and "indices 0..1" in message


def test_empty_split(tmp_path: Path, write_config) -> None:
    message = _load_error(tmp_path, write_config, SPEC, "index\tsentence1\tsentence2\tlabel\n")
    assert "task 'rte', train: split is empty" in message and "train.tsv" in message


def test_split_empty_after_skipping_malformed_rows(tmp_path: Path, write_config) -> None:
    message = _load_error(tmp_path, write_config, SPEC, GOOD.splitlines()[0] + "\nonly\tthree\tf\n")
    assert "train: split is empty" in message and "1 malformed rows skipped" in message


def test_rename_of_absent_column(tmp_path: Path, write_config) -> None:
    spec = {**SPEC, "train": {"path": "train.tsv", "rename": {"text_a": "sentence1"}}}
    message = _load_error(tmp_path, write_config, spec)
    assert "train.rename: column 'text_a' not found" in message and "sentence1" in message


def test_an_encoding_whose_codec_refuses_the_file_is_one_line(tmp_path: Path, write_config) -> None:
    spec = {**SPEC, "train": {"path": "train.tsv", "encoding": "utf-16"}}  # no UTF-16 BOM
    message = _load_error(tmp_path, write_config, spec)
    assert "train.encoding: " in message and "is not utf-16" in message


def test_a_symlink_loop_is_one_line(tmp_path: Path, write_config) -> None:
    (tmp_path / "loop.tsv").symlink_to(tmp_path / "loop.tsv")
    spec = {**SPEC, "train": {"path": str(tmp_path / "loop.tsv")}}  # absolute: read, not resolved
    message = _load_error(tmp_path, write_config, spec)
    assert "train.path: cannot read" in message and "symbolic links" in message


def test_a_byte_order_mark_is_never_part_of_a_column_name(tmp_path: Path, write_config) -> None:
    (tmp_path / "train.tsv").write_bytes(b"\xef\xbb\xbf" + GOOD.encode())
    (tmp_path / "dev.tsv").write_text(GOOD)
    spec = {**SPEC, "train": {"path": "train.tsv", "encoding": "utf-8"}}  # said, not the default
    task = load_task(load_tasks_config(write_config({"rte": spec}))["rte"])
    assert len(task.train) == 2


def test_wrong_encoding(tmp_path: Path, write_config) -> None:
    spec = {**SPEC, "train": {"path": "train.tsv", "encoding": "ascii"}}
    message = _load_error(tmp_path, write_config, spec, GOOD.replace("A cat", "Ä cat").encode())
    assert "train.encoding" in message and "ascii" in message


def test_invalid_json(tmp_path: Path, write_config) -> None:
    (tmp_path / "t.json").write_text('{"0": {"a": 1}')
    message = _load_error(tmp_path, write_config, {**SPEC, "train": "t.json"})
    assert "train.path" in message and "not valid JSON" in message


def test_hub_split_missing_lists_splits(tmp_path: Path, write_config) -> None:
    import datasets

    table = datasets.Dataset.from_dict({"sentence1": ["a"], "sentence2": ["b"], "label": [0]})
    datasets.DatasetDict({"train": table}).save_to_disk(tmp_path / "saved")
    spec = {**SPEC, "hub": "saved", "train": "train", "dev": "validation"}
    message = _load_error(tmp_path, write_config, spec)
    assert "dev.split: split 'validation' not in" in message and "splits there: train" in message
