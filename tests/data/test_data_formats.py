"""load_task on every file format, the hub path (save_to_disk), splits and subsampling."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from adapterfleet.data import TaskError, load_task, load_tasks_config

PAIR = {"text_fields": ["premise", "hypothesis"], "label_names": ["entailment", "contradiction"]}
ROWS = [
    ("A man sleeps.", "Someone rests.", "entailment"),
    ("A dog runs, fast.", 'The "dog" sits.', "contradiction"),
    ("Kids play.", "Children are playing.", "entailment"),
]


def _tsv(path: Path, header: bool = True, bom: bool = False) -> None:
    lines = ["premise\thypothesis\tlabel"] if header else []
    lines += ["\t".join(row) for row in ROWS]
    path.write_text(("\ufeff" if bom else "") + "\n".join(lines) + "\n", encoding="utf-8")


def _load(write_config, tasks: dict) -> dict:
    return {n: load_task(s) for n, s in load_tasks_config(write_config(tasks)).items()}


def _texts(task) -> list[tuple]:
    return list(zip(task.train["text_a"], task.train["text_b"], task.train["label"], strict=True))


EXPECTED = [(a, b, 0 if label == "entailment" else 1) for a, b, label in ROWS]


def test_tsv_with_header_and_bom(tmp_path: Path, write_config) -> None:
    _tsv(tmp_path / "train.tsv", bom=True)
    _tsv(tmp_path / "dev.tsv")
    task = _load(write_config, {"t": {"train": "train.tsv", "dev": "dev.tsv", **PAIR}})["t"]
    assert _texts(task) == EXPECTED
    assert task.train.column_names == ["text_a", "text_b", "label"]
    assert task.label_names == ("entailment", "contradiction") and task.skipped == 0


def test_tsv_without_header_uses_columns(tmp_path: Path, write_config) -> None:
    _tsv(tmp_path / "q.tsv", header=False)
    source = {"path": "q.tsv", "header": False, "columns": ["premise", "hypothesis", "label"]}
    task = _load(write_config, {"t": {"train": source, "dev": source, **PAIR}})["t"]
    assert _texts(task) == EXPECTED


def test_csv_with_quoted_fields(tmp_path: Path, write_config) -> None:
    import csv

    with (tmp_path / "d.csv").open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["premise", "hypothesis", "label"])
        writer.writerows(ROWS)
    task = _load(write_config, {"t": {"train": "d.csv", "dev": "d.csv", **PAIR}})["t"]
    assert _texts(task) == EXPECTED


def _pandas_style_tsv(path: Path) -> None:
    """A TSV as pandas, Excel and `csv.writer` write one: a field holding a quote, a tab or a
    line break between quotes, each quote in it doubled."""
    import csv

    rows = [*ROWS, ("Two\nlines.", "A\ttab.", "entailment")]
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle, delimiter="\t")
        writer.writerow(["premise", "hypothesis", "label"])
        writer.writerows(rows)


def test_a_quoted_tsv_is_read_with_quotes_true(tmp_path: Path, write_config) -> None:
    _pandas_style_tsv(tmp_path / "q.tsv")
    source = {"path": "q.tsv", "quotes": True}
    task = _load(write_config, {"t": {"train": source, "dev": source, **PAIR}})["t"]
    assert _texts(task) == [*EXPECTED, ("Two\nlines.", "A\ttab.", 0)] and task.skipped == 0


def test_a_tsv_that_looks_quoted_says_so_and_names_the_key(
    tmp_path: Path, write_config, caplog: pytest.LogCaptureFixture
) -> None:
    """Read as GLUE's files are (a bare quote is text), a quoted TSV keeps its quotes and loses
    the row its line break split: said once per split, with the key that reads it right."""
    _pandas_style_tsv(tmp_path / "q.tsv")
    _tsv(tmp_path / "dev.tsv")
    tasks = {"t": {"train": "q.tsv", "dev": "dev.tsv", **PAIR}}
    with pytest.raises(TaskError, match="2 of 5 records .* looks written with quotes: set train"):
        _load(write_config, tasks)  # the broken row's two parts are 40 % of this small file
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="adapterfleet.data"):
        task = _load(write_config, {"t": {**tasks["t"], "max_skipped_fraction": 0.5}})["t"]
    assert task.train["text_b"][1] == '"The ""dog"" sits."'
    said = [r.getMessage() for r in caplog.records if "looks written with" in r.getMessage()]
    assert len(said) == 1 and "task 't', train: " in said[0] and "line 3 looks" in said[0]
    assert said[0].endswith(
        "set train.quotes: true if a program (pandas, Excel, csv.writer) wrote the file"
    )


def test_glue_style_bare_quotes_say_nothing(
    tmp_path: Path, write_config, caplog: pytest.LogCaptureFixture
) -> None:
    lines = ["premise\thypothesis\tlabel", '"Hi," he said.\tA "quote\tentailment']
    lines += ['"All of it."\tSo.\tcontradiction']
    (tmp_path / "g.tsv").write_text("\n".join(lines) + "\n")
    with caplog.at_level(logging.WARNING, logger="adapterfleet.data"):
        task = _load(write_config, {"t": {"train": "g.tsv", "dev": "g.tsv", **PAIR}})["t"]
    assert task.train["text_a"] == ['"Hi," he said.', '"All of it."']
    assert task.train["text_b"][0] == 'A "quote'
    assert not [r for r in caplog.records if "looks written with" in r.getMessage()]


def test_jsonl_json_object_json_list_and_parquet(tmp_path: Path, write_config) -> None:
    records = [{"premise": a, "hypothesis": b, "label": c} for a, b, c in ROWS]
    (tmp_path / "a.jsonl").write_text("\n".join(json.dumps(r) for r in records) + "\n")
    (tmp_path / "b.json").write_text(json.dumps({str(i): r for i, r in enumerate(records)}))
    (tmp_path / "c.json").write_text(json.dumps(records))
    pq.write_table(pa.Table.from_pylist(records), tmp_path / "d.parquet")
    tasks = {name: {"train": name, "dev": name, **PAIR} for name in ("a.jsonl", "b.json")}
    tasks |= {name: {"train": name, "dev": name, **PAIR} for name in ("c.json", "d.parquet")}
    loaded = _load(write_config, {k.replace(".", "_"): v for k, v in tasks.items()})
    assert len(loaded) == 4
    for task in loaded.values():
        assert _texts(task) == EXPECTED


def test_single_text_and_integer_labels(tmp_path: Path, write_config) -> None:
    (tmp_path / "s.tsv").write_text("sentence\tlabel\ngood film \t1\nbad film\t0\nok\t 1\n")
    records = [{"sentence": "x", "label": 1}, {"sentence": "y", "label": 0}]
    (tmp_path / "s.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    spec = {"train": "s.tsv", "dev": "s.jsonl", "text_fields": "sentence"}
    task = _load(write_config, {"s": {**spec, "label_names": ["negative", "positive"]}})["s"]
    assert task.train.column_names == ["text_a", "label"]
    assert task.train["text_a"] == ["good film ", "bad film", "ok"]
    assert task.train["label"] == [1, 0, 1] and task.dev["label"] == [1, 0]


def test_per_split_rename(tmp_path: Path, write_config) -> None:
    train = {str(i): {"text_a": a, "text_b": b, "label": c} for i, (a, b, c) in enumerate(ROWS)}
    (tmp_path / "train.json").write_text(json.dumps(train))
    dev = [{"premise": a, "hypothesis": b, "label": c} for a, b, c in ROWS]
    (tmp_path / "dev.jsonl").write_text("\n".join(json.dumps(r) for r in dev))
    rename = {"text_a": "premise", "text_b": "hypothesis"}
    source = {"path": "train.json", "rename": rename}
    task = _load(write_config, {"m": {"train": source, "dev": "dev.jsonl", **PAIR}})["m"]
    assert _texts(task) == EXPECTED and task.dev["text_a"] == [r[0] for r in ROWS]


def test_malformed_rows_are_skipped_counted_and_logged(
    tmp_path: Path, write_config, caplog: pytest.LogCaptureFixture
) -> None:
    lines = ["1\t2\tA\tB", "3\t4\tC\tD\t0", "5\t6\tE\tF\t1", "", "7\t8\tG\tH\t1\textra"]
    (tmp_path / "q.tsv").write_text("\n".join(lines) + "\n")
    (tmp_path / "d.jsonl").write_text('{"a": "x", "b": "y", "l": 0}\nnot json\n{"a": null}\n')
    source = {"path": "q.tsv", "header": False, "columns": ["i", "j", "a", "b", "l"]}
    spec = {"train": source, "dev": "d.jsonl", "text_fields": ["a", "b"], "label_field": "l"}
    spec["max_skipped_fraction"] = 0.7  # a tiny file: 2 of 3 dev records are bad
    with caplog.at_level(logging.WARNING, logger="adapterfleet.data"):
        task = _load(write_config, {"q": {**spec, "label_names": ["0", "1"]}})["q"]
    assert task.train["text_a"] == ["C", "E"] and task.train["label"] == [0, 1]
    assert task.skipped_by_split == {"train": 2, "dev": 2} and task.skipped == 4
    assert any("skipped 2 rows" in r.getMessage() for r in caplog.records)


def _numbered(path: Path, n: int) -> None:
    path.write_text("text\tlabel\n" + "".join(f"row {i}\t{i % 2}\n" for i in range(n)))


def test_dev_fraction_is_deterministic_and_disjoint(tmp_path: Path, write_config) -> None:
    _numbered(tmp_path / "all.tsv", 200)
    spec = {"train": "all.tsv", "dev_fraction": 0.1, "text_fields": "text", "label_names": [0, 1]}
    first = _load(write_config, {"t": spec})["t"]
    again = _load(write_config, {"t": spec})["t"]
    other = _load(write_config, {"t": {**spec, "seed": 1}})["t"]
    assert len(first.train) == 180 and len(first.dev) == 20
    assert first.dev["text_a"] == again.dev["text_a"] != other.dev["text_a"]
    assert set(first.train["text_a"]).isdisjoint(first.dev["text_a"])
    assert first.dev["text_a"] != [f"row {i}" for i in range(20)]  # held out at random


def test_max_examples_subsample_deterministically(tmp_path: Path, write_config) -> None:
    _numbered(tmp_path / "a.tsv", 100)
    base = {"train": "a.tsv", "dev": "a.tsv", "text_fields": "text", "label_names": [0, 1]}
    spec = {**base, "max_train_examples": 10, "max_dev_examples": 5}
    first, again = (_load(write_config, {"t": spec})["t"] for _ in range(2))
    assert len(first.train) == 10 and len(first.dev) == 5
    assert first.train["text_a"] == again.train["text_a"]
    assert first.train["text_a"] != [f"row {i}" for i in range(10)]
    big = _load(write_config, {"t": {**base, "max_train_examples": 1000}})["t"]
    assert len(big.train) == 100


def test_multiple_choice(tmp_path: Path, write_config) -> None:
    rows = [
        {"q": "The sky is", "c0": "blue", "c1": "a fish", "c2": "loud", "answer": 0},
        {"q": "Fire is", "c0": "cold", "c1": "hot", "c2": "wet", "answer": "c1"},
    ]
    (tmp_path / "mc.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    spec = {
        "type": "multiple_choice",
        "train": "mc.jsonl",
        "dev": "mc.jsonl",
        "question_field": "q",
        "choice_fields": ["c0", "c1", "c2"],
        "label_field": "answer",
    }
    task = _load(write_config, {"mc": spec})["mc"]
    assert task.train.column_names == ["question", "choices", "label"]
    assert task.train["choices"] == [["blue", "a fish", "loud"], ["cold", "hot", "wet"]]
    assert task.train["label"] == [0, 1] and task.num_labels == 3


def test_hub_path_on_a_saved_dataset(tmp_path: Path, write_config) -> None:
    import datasets

    features = datasets.Features(
        {
            "s1": datasets.Value("string"),
            "s2": datasets.Value("string"),
            "label": datasets.ClassLabel(names=["no", "yes"]),
        }
    )
    train = datasets.Dataset.from_dict(
        {"s1": ["a", "b", "c"], "s2": ["x", "y", "z"], "label": [1, 0, 1]}, features=features
    )
    dev = train.rename_column("s1", "first").select([0, 2])
    datasets.DatasetDict({"train": train, "validation": dev}).save_to_disk(tmp_path / "hubds")
    spec = {
        "hub": "hubds",
        "train": "train",
        "dev": {"rename": {"first": "s1"}},
        "text_fields": ["s1", "s2"],
        "label_names": ["no", "yes"],
    }
    task = _load(write_config, {"h": spec})["h"]
    assert task.spec.hub == str((tmp_path / "hubds").resolve())
    assert task.train["text_a"] == ["a", "b", "c"] and task.train["label"] == [1, 0, 1]
    assert task.dev["text_a"] == ["a", "c"] and task.dev["text_b"] == ["x", "z"]
