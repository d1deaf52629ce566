"""The input of `adapterfleet predict` (data/prediction_input.py): ids carried as text, whatever
their type in the file, so the output can always be written; a record JSON cannot read to
Python is refused in one line."""

from __future__ import annotations

import datetime
import decimal
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from adapterfleet.data import TaskError, TaskSpec
from adapterfleet.data.prediction_input import read_input

TASK = {
    "train": "train.tsv",
    "dev": "dev.tsv",
    "text_fields": ["s1", "s2"],
    "label_names": ["entailment", "not_entailment"],
}
TEXTS = {"s1": ["A cat.", "A dog."], "s2": ["An animal.", "A fish."]}


@pytest.fixture
def spec(tmp_path: Path) -> TaskSpec:
    return TaskSpec.from_mapping("rte", TASK, tmp_path)


@pytest.mark.parametrize(
    ("ids", "expected"),
    [
        (
            pa.array([datetime.datetime(2024, 1, 1), datetime.datetime(2024, 1, 2, 9, 30)]),
            ["2024-01-01 00:00:00", "2024-01-02 09:30:00"],
        ),
        (pa.array([b"a1", b"\x00\xff"], pa.binary()), ["a1", "b'\\x00\\xff'"]),
        (
            pa.array([decimal.Decimal("7"), decimal.Decimal("8.50")], pa.decimal128(5, 2)),
            ["7.00", "8.50"],
        ),
        (pa.array([3.0, float("nan")]), ["3", None]),
        (pa.array([None, 12], pa.int64()), [None, "12"]),
    ],
)
def test_parquet_ids_of_any_type_are_read_as_text(
    tmp_path: Path, spec: TaskSpec, ids: pa.Array, expected: list[Any]
) -> None:
    pq.write_table(pa.table({"id": ids, **TEXTS}), tmp_path / "in.parquet")
    data = read_input(spec, tmp_path / "in.parquet")
    assert data.id_field == "id" and data.ids == expected
    json.dumps([{"id": value} for value in data.ids], allow_nan=False)  # what predict writes


def test_an_integer_of_over_4300_digits_is_a_malformed_input_row(
    tmp_path: Path, spec: TaskSpec
) -> None:
    rows = [{"id": i, "s1": TEXTS["s1"][i], "s2": TEXTS["s2"][i]} for i in range(2)]
    lines = [json.dumps(row) for row in rows]
    lines[1] = lines[1][:-1] + ', "extra": 1' + "0" * 5000 + "}"
    (tmp_path / "in.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(TaskError) as error:
        read_input(spec, tmp_path / "in.jsonl")
    message = str(error.value)
    assert "\n" not in message and message.startswith("task 'rte', input: 1 malformed row in ")
    assert "(malformed at line 2); fix or remove them" in message


def test_columns_given_as_one_str_are_refused_naming_the_list(spec, tmp_path) -> None:
    """`predict_file(..., header=False, columns="id,s1,s2")` from Python read a column per
    character, and said the rows of a good file were malformed."""
    path = tmp_path / "in.csv"
    path.write_text("1,A cat.,An animal.\n")
    with pytest.raises(TaskError, match=r"columns: expected a list of column names, got the str"):
        read_input(spec, path, header=False, columns="id, s1,s2")  # type: ignore[arg-type]
    with pytest.raises(TaskError, match=r"give \['id', 's1', 's2'\]"):
        read_input(spec, path, header=False, columns="id, s1,s2")  # type: ignore[arg-type]


def test_a_missing_text_column_gets_the_fix_of_where_the_names_came_from(spec, tmp_path) -> None:
    """It always said "or name its columns with --columns", which over a header line is refused
    (--columns needs --no-header) and with --no-header predicted the header as a row."""
    path = tmp_path / "in.csv"
    path.write_text("id,s1,review\n1,A cat.,An animal.\n")
    cases = {
        (True, None): "columns there: id, s1, review (its first line); name a header column "
        "'s2', or, if that line is a row, pass --no-header (and --columns)",
        (False, ("id", "s1", "x")): "columns there: id, s1, x; name the columns with --columns, "
        "one of them 's2'",
    }
    for (header, columns), fix in cases.items():
        with pytest.raises(TaskError) as caught:
            read_input(spec, path, header=header, columns=columns)
        assert str(caught.value).endswith(f"input column 's2': not found in {path}; {fix}")
    (tmp_path / "in.jsonl").write_text('{"s1": "A cat."}\n')
    with pytest.raises(TaskError, match=r"columns there: s1; give a file with the task's fields"):
        read_input(spec, tmp_path / "in.jsonl")
    (tmp_path / "in.jsonl").write_text('{"s1": "A cat.", "S2": "An animal."}\n')  # the case
    with pytest.raises(TaskError, match=r"not found in .*in.jsonl \('S2' there differs only in"):
        read_input(spec, tmp_path / "in.jsonl")


def test_an_input_of_no_known_format_names_the_formats_and_format(spec, tmp_path) -> None:
    """A suffix with no format said `unknown format None for rev.txt`."""
    fix = "pass --format with one of tsv, csv, jsonl, json, parquet"
    for name, why in (("rev.txt", "its suffix '.txt'"), ("rev", "a name without a suffix")):
        (tmp_path / name).write_text("s1\ts2\nA cat.\tAn animal.\n")
        with pytest.raises(TaskError) as caught:
            read_input(spec, tmp_path / name)
        assert str(caught.value) == f"task 'rte', input: no format known for {name} ({why}); {fix}"
    with pytest.raises(TaskError) as caught:
        read_input(spec, tmp_path / "rev.txt", fmt="xml")
    assert str(caught.value) == (
        "task 'rte', --format: unknown format 'xml' for rev.txt; use one of tsv, csv, jsonl, "
        "json, parquet"
    )
    assert read_input(spec, tmp_path / "rev.txt", fmt="tsv").texts == [("A cat.", "An animal.")]


def test_an_id_field_not_in_the_input_lists_the_columns_there(spec, tmp_path) -> None:
    """It said `name an existing one` without naming any, where the text columns' errors list
    them."""
    path = tmp_path / "in.tsv"
    path.write_text("idx\ts1\ts2\n1\tA cat.\tAn animal.\n")
    with pytest.raises(TaskError) as caught:
        read_input(spec, path, id_field="nope")
    assert str(caught.value) == (
        f"task 'rte', --id-field: column 'nope' not found in {path}; columns there: idx, s1, s2; "
        "give one of them"
    )
    assert read_input(spec, path).ids == ["1"]


def test_a_quoted_tsv_input_is_read_with_predict_quotes(tmp_path, caplog) -> None:
    """A TSV input with quoted line breaks, for a task whose train file is a CSV: the warning
    said to set the task's train.quotes, which reads only inputs of train's own format, and
    the malformed-rows error gave no quote hint. `--quotes` (quotes=True) reads it."""
    spec = TaskSpec.from_mapping("rte", {**TASK, "train": "t.csv", "dev": "d.csv"}, tmp_path)
    path = tmp_path / "in.tsv"
    path.write_text('s1\ts2\n"A\ncat."\tAn animal.\nA dog.\t"A ""fish""."\n')
    with (
        caplog.at_level("WARNING", logger="adapterfleet.data.readers"),
        pytest.raises(TaskError) as caught,
    ):
        read_input(spec, path)
    assert str(caught.value).endswith(
        "(one prediction is written per input row), or pass --quotes: line 2 looks written "
        "with quotes"
    )
    (said,) = [r.getMessage() for r in caplog.records if "read without quotes" in r.getMessage()]
    assert said.endswith(
        "pass predict --quotes if a program (pandas, Excel, csv.writer) wrote the file"
    )
    read = read_input(spec, path, quotes=True)
    assert read.texts == [("A\ncat.", "An animal."), ("A dog.", 'A "fish".')]
    with pytest.raises(TaskError, match=r"--quotes: only for tsv/csv files, not jsonl"):
        (tmp_path / "in.jsonl").write_text('{"s1": "a", "s2": "b"}\n')
        read_input(spec, tmp_path / "in.jsonl", quotes=True)


def test_an_input_not_in_utf8_names_the_byte_and_its_line(spec, tmp_path) -> None:
    """A Latin-1 input said `is not text in utf-8-sig` (Python's codec name, and no place);
    now the byte and line, as a training file's refusal names them."""
    path = tmp_path / "in.csv"
    path.write_bytes("s1,s2\nA cat.,An animal.\nA caf\u00e9.,A place.\n".encode("latin-1"))
    with pytest.raises(TaskError) as caught:
        read_input(spec, path)
    assert str(caught.value) == (
        f"task 'rte', input: {path} is not UTF-8: byte 0xe9 on line 3 (invalid continuation "
        "byte); pass --encoding with the file's (e.g. latin-1, cp1252, utf-16), or save it as "
        "UTF-8"
    )


def test_predict_encoding_reads_an_input_in_another_encoding(spec, tmp_path) -> None:
    """`--encoding` reads a Latin-1 or UTF-16 input as a split's `encoding:` reads a training
    file (there was no way but to convert the file); a name that is no text encoding, or one
    given for Parquet, is refused as the option."""
    rows = "s1,s2\nA cat.,An animal.\nA caf\u00e9.,A place.\n"
    for encoding in ("latin-1", "utf-16"):
        path = tmp_path / f"in-{encoding}.csv"
        path.write_bytes(rows.encode(encoding))
        read = read_input(spec, path, encoding=encoding)
        assert read.texts == [("A cat.", "An animal."), ("A caf\u00e9.", "A place.")]
    with pytest.raises(TaskError) as caught:
        read_input(spec, path, encoding="latin-9x")
    assert str(caught.value) == (
        "task 'rte', --encoding: unknown encoding 'latin-9x'; e.g. utf-8, latin-1, cp1252, utf-16"
    )
    with pytest.raises(TaskError, match=r"--encoding: 'rot13' is not a text encoding"):
        read_input(spec, path, encoding="rot13")
    table = pa.table({"s1": ["A cat."], "s2": ["An animal."]})
    pq.write_table(table, tmp_path / "in.parquet")
    with pytest.raises(TaskError, match=r"--encoding: only for text files"):
        read_input(spec, tmp_path / "in.parquet", encoding="latin-1")
