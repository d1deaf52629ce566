"""How a classification label cell is read (`data/labels.py`): by name, else as an index, one
reading per column, and the refusals that name the record and the fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from adapterfleet.data import TaskError, TaskSpec, load_task, load_tasks_config


def _senti(tmp_path: Path, write_config, labels: list[str], names: list[str]) -> TaskSpec:
    """CSVs of `review,sentiment` whose sentiment cells are `labels`, as train and dev."""
    lines = ["review,sentiment"] + [f"review {i},{label}" for i, label in enumerate(labels)]
    (tmp_path / "train.csv").write_text("\n".join(lines) + "\n")
    (tmp_path / "dev.csv").write_text("\n".join(lines) + "\n")
    task = {"train": "train.csv", "dev": "dev.csv", "text_fields": ["review"]}
    task |= {"label_field": "sentiment", "label_names": names}
    return load_tasks_config(write_config({"senti": task}))["senti"]


def _refusal(spec: TaskSpec) -> str:
    with pytest.raises(TaskError) as info:
        load_task(spec)
    return str(info.value)


def test_stray_integers_among_label_names_are_refused_with_their_records(
    tmp_path: Path, write_config
) -> None:
    """A neg/pos column with three cells `1`, `1`, `0` loaded them as pos, pos, neg without a
    word: only label_names that are integers were checked for a mix."""
    labels = ["neg", "pos"] * 4 + ["1", "neg", "1", "0", "pos"]
    message = _refusal(_senti(tmp_path, write_config, labels, ["neg", "pos"]))
    assert message == (
        f"task 'senti', train 'sentiment': {tmp_path / 'train.csv'} mixes label names (neg, pos) "
        "with integers (0, 1; 3 records: 9, 11, 12) (read as an index, 0 would be 'neg'); "
        "write those records' labels as names of label_names ['neg', 'pos'], or every label as "
        "its index"
    )


def test_a_column_of_integers_alone_is_index_coded(tmp_path: Path, write_config) -> None:
    """GLUE's 0/1 with names, and integer names read by name, stay accepted."""
    task = load_task(_senti(tmp_path, write_config, ["0", "1", "1", "0"], ["neg", "pos"]))
    assert task.train["label"] == [0, 1, 1, 0]
    task = load_task(_senti(tmp_path, write_config, ["1", "2", "2"], ["1", "2"]))
    assert task.train["label"] == [0, 1, 1]


def test_a_whole_number_written_as_a_float_reads_as_the_float_does(
    tmp_path: Path, write_config
) -> None:
    """pandas writes a float column 0.0/1.0 to CSV: against label_names ["0", "1"] the CSV was
    refused (`unknown label value '0.0'`) while the same data as Parquet (0.0 -> "0") loaded."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from_csv = load_task(_senti(tmp_path, write_config, ["0.0", "1.0", "1.00", "0.0"], ["0", "1"]))
    table = pa.table({"review": [f"review {i}" for i in range(4)], "sentiment": [0.0, 1, 1, 0]})
    pq.write_table(table, tmp_path / "train.parquet")
    task = {"train": "train.parquet", "dev": "train.parquet", "text_fields": ["review"]}
    task |= {"label_field": "sentiment", "label_names": ["0", "1"]}
    from_parquet = load_task(load_tasks_config(write_config({"senti": task}))["senti"])
    assert from_csv.train["label"] == from_parquet.train["label"] == [0, 1, 1, 0]
    # a float that is no whole number is still no label
    message = _refusal(_senti(tmp_path, write_config, ["0.0", "0.5", "1.0"], ["0", "1"]))
    assert "unknown label value '0.5' (record 2 of" in message


def test_whole_floats_against_text_names_are_indices_as_in_parquet(
    tmp_path: Path, write_config
) -> None:
    """Against label_names [neg, pos] a Parquet 1.0 was index 1 and the same CSV's "1.0" was
    refused (`unknown label value '1.0'`); both are index 1 now. A label name that is itself a
    float is still read by name, and whole floats among names are refused as integers are."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from_csv = load_task(_senti(tmp_path, write_config, ["1.0", "0.0", "1.0"], ["neg", "pos"]))
    table = pa.table({"review": [f"review {i}" for i in range(3)], "sentiment": [1.0, 0.0, 1.0]})
    pq.write_table(table, tmp_path / "train.parquet")
    task = {"train": "train.parquet", "dev": "train.parquet", "text_fields": ["review"]}
    task |= {"label_field": "sentiment", "label_names": ["neg", "pos"]}
    from_parquet = load_task(load_tasks_config(write_config({"senti": task}))["senti"])
    assert from_csv.train["label"] == from_parquet.train["label"] == [1, 0, 1]
    by_name = load_task(_senti(tmp_path, write_config, ["1.0", "0.5", "1.0"], ["0.5", "1.0"]))
    assert by_name.train["label"] == [1, 0, 1]
    message = _refusal(_senti(tmp_path, write_config, ["neg", "pos", "1.0"], ["neg", "pos"]))
    assert "mixes label names (neg, pos) with integers (1; 1 record: 3)" in message


@pytest.mark.parametrize(
    ("cell", "names", "like"),
    [
        (" NEG", ["neg", "pos"], "'neg'"),
        ("Pos ", ["neg", "pos"], "'pos'"),
        ("True", ["false", "true"], "'true'"),
    ],
)
def test_a_label_in_other_case_or_spaces_says_to_clean_the_column(
    tmp_path: Path, write_config, cell: str, names: list[str], like: str
) -> None:
    """' NEG' against ["neg", "pos"] (and pandas' True in a CSV against ["false", "true"]) said
    `fix label_names`, where the data is what to fix; it is still refused, not matched."""
    labels = [names[0], names[1], names[0], cell, names[1]]
    message = _refusal(_senti(tmp_path, write_config, labels, names))
    assert message.endswith(
        f"unknown label value {cell!r} (record 4 of {tmp_path / 'train.csv'}); it is {like} "
        "in other case; clean the column (label names match case; spaces around a value are "
        "ignored)"
    )  # it said "with other case or spaces", while spaces alone are taken (below)


def test_spaces_around_a_label_name_are_taken(tmp_path: Path, write_config) -> None:
    spaced = load_task(_senti(tmp_path, write_config, [" neg", "pos ", "neg"], ["neg", "pos"]))
    assert spaced.train["label"] == [0, 1, 0]


def _splits(tmp_path: Path, write_config, train: list[str], dev: list[str]) -> TaskSpec:
    for split, labels in (("train", train), ("dev", dev)):
        lines = ["review,sentiment"] + [f"{split} {i},{label}" for i, label in enumerate(labels)]
        (tmp_path / f"{split}.csv").write_text("\n".join(lines) + "\n")
    task = {"train": "train.csv", "dev": "dev.csv", "text_fields": ["review"]}
    task |= {"label_field": "sentiment", "label_names": ["pos", "neg"]}
    return load_tasks_config(write_config({"senti": task}))["senti"]


def test_train_by_name_and_dev_by_index_are_refused(tmp_path: Path, write_config) -> None:
    """A train of names beside a dev of 0/1 meaning 1 = pos loaded, and dev's labels were read
    against label_names [pos, neg]: inverted, scored without a word. Each column alone is
    fine; together they are refused, naming both files and the fix."""
    spec = _splits(tmp_path, write_config, ["neg", "pos", "neg"], ["0", "1", "1", "0"])
    assert _refusal(spec) == (
        f"task 'senti', dev 'sentiment': the splits write labels differently: "
        f"{tmp_path / 'train.csv'} as names (neg, pos), {tmp_path / 'dev.csv'} as indices "
        "(0, 1); dev's 0 would be read as 'pos' (label_names[0]), and nothing shows that is "
        "what the file means; write both splits' labels the same way: names of label_names "
        "['pos', 'neg'], or indices in that order"
    )
    spec = _splits(tmp_path, write_config, ["1", "0"], ["neg", "pos"])
    assert "dev 'sentiment'" not in _refusal(spec)  # the split written as indices is named
    assert "train 'sentiment'" in _refusal(spec)
    same = load_task(_splits(tmp_path, write_config, ["1", "0", "1"], ["0", "1"]))
    assert same.dev["label"] == [0, 1]
    same = load_task(_splits(tmp_path, write_config, ["neg", "pos"], ["pos", "neg"]))
    assert same.dev["label"] == [0, 1]
