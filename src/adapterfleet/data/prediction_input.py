"""The input of `adapterfleet predict`: rows of a file (any format `data/` reads) holding a task's
text fields, with their ids, read and tokenised exactly as training reads and tokenises a split.

Labels are not needed. Column renames and header-less column names come from the task's
declaration; the id column defaults to the first of `ID_FIELDS` found in the file."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from adapterfleet.console import plural
from adapterfleet.data.choices import check_columns, holds, labels_of, record_texts
from adapterfleet.data.compressed import refuse_compressed
from adapterfleet.data.encodings import parse_encoding
from adapterfleet.data.errors import TaskError
from adapterfleet.data.input_stream import FORMAT_FIX, is_stream, spooled
from adapterfleet.data.quality import RowRef, cell_text, check_once, other_case, skip_places
from adapterfleet.data.readers import RawSplit, read_file
from adapterfleet.data.sources import EXTENSIONS, FORMATS, SplitSource
from adapterfleet.data.tasks import TaskSpec

if TYPE_CHECKING:
    from adapterfleet.data.cache import TokenizedSplit

ID_FIELDS = ("id", "idx", "index", "guid")


@dataclass(frozen=True)
class PredictionInput:
    """The rows of an input file: their texts (in the task's field order) and ids."""

    source: str
    fields: tuple[str, ...]
    texts: list[tuple[str, ...]]
    id_field: str | None = None
    ids: list[str | None] | None = None  # as text: `id_text`
    labels: list[tuple[str, ...]] | None = None  # multiple choice: each row's (`input_labels`)

    def __len__(self) -> int:
        return len(self.texts)


def input_fields(spec: TaskSpec) -> tuple[str, ...]:
    """The texts a prediction row holds: the task's text fields; for multiple choice the
    context and each choice as `choices.record_texts` makes them from a record."""
    if spec.is_multiple_choice:
        return ("context", *(f"choice_{i}" for i in range(spec.num_labels)))
    return spec.text_fields


def read_input(
    spec: TaskSpec,
    path: Path,
    *,
    fmt: str | None = None,
    header: bool = True,
    columns: Sequence[str] | None = None,
    id_field: str | None = None,
    quotes: bool | None = None,
    encoding: str | None = None,
) -> PredictionInput:
    """Read the rows of `path` (tsv, csv, jsonl, json, parquet). Columns are renamed as the
    task's splits declare; every row needs every text field; a label column is not needed.

    `header=False` takes column names from `columns`, else from the task's declaration.
    `quotes` (`--quotes`): whether a tsv/csv's fields may be quoted; None: as the task's own
    file of that format says (`quotes:`), else the format's default. `encoding` (`--encoding`):
    the text encoding of a tsv, csv or JSON input; None: UTF-8.
    `id_field` defaults to the first of id, idx, index, guid found in the file. `-` (or a
    pipe, `/dev/stdin`) is standard input, read whole first; it needs `fmt`."""
    task = spec.name
    path = Path(path)
    if is_stream(path):
        with spooled(spec.name, path, fmt) as copy:
            data = read_input(
                spec, copy, fmt=fmt, header=header, columns=columns, id_field=id_field,
                quotes=quotes, encoding=encoding,
            )  # fmt: skip
        return replace(data, source="standard input" if str(path) == "-" else str(path))
    raw = _read_rows(spec, path, fmt, header, columns, quotes, encoding)
    renames = {old: new for s in (spec.train, spec.dev) if s for old, new in s.rename.items()}
    rows = [{renames.get(k, k): v for k, v in row.items()} for row in raw.rows]
    present = [renames.get(c, c) for c in raw.columns]
    fields = input_fields(spec)
    repeated = {renames.get(k, k): v for k, v in raw.repeated.items()}
    if rows or present:  # a JSON lines file of no records names no columns to check
        fmt = _input_format(task, path, fmt)
        _check_columns(spec, RawSplit(str(path), present, rows, repeated=repeated), fmt, header)
        id_field = _id_field(task, path, id_field, present)
    texts = [_texts(spec, path, n, row, fields) for n, row in enumerate(rows, start=1)]
    labels = input_labels(spec, path, rows)
    ids = [id_text(row.get(id_field)) for row in rows] if id_field else None
    return PredictionInput(str(path), fields, texts, id_field, ids, labels)


def _check_columns(spec: TaskSpec, raw: RawSplit, fmt: str, header: bool) -> None:
    """The columns the task reads are there, each once (read from a header line, --columns or
    the records' own keys)."""
    if spec.is_multiple_choice:
        check_columns(spec, "input", raw)
        return
    fields = input_fields(spec)
    _check_fields(spec.name, Path(raw.source), fields, raw.columns, fmt, header)
    check_once(spec, "input", raw, [("text_fields", name) for name in fields])


def _read_rows(
    spec: TaskSpec,
    path: Path,
    fmt: str | None,
    header: bool,
    columns: Sequence[str] | None,
    quotes: bool | None,
    encoding: str | None,
) -> RawSplit:
    """The raw rows of `path`, refused when it is missing, unreadable, not in its encoding or
    malformed."""
    task = spec.name
    if not path.is_file():
        raise TaskError(task, "input", f"file not found: {path}", "check the --input path")
    refuse_compressed(task, "input", path, "pass the result as --input")  # before its suffix
    fmt = _input_format(task, path, fmt)
    source = _input_source(spec, path, fmt, header, columns, quotes, encoding)
    if path.stat().st_size == 0 and (fmt == "jsonl" or (fmt in ("tsv", "csv") and not header)):
        # no record, and no header line expected: zero rows (a csv/tsv with a header
        # expected and not even that is refused as empty by the reader: a likely mistake)
        return RawSplit(str(path), list(source.columns or ()), [])
    try:
        raw = read_file(task, "input", source)
    except OSError as error:
        raise TaskError(task, "input", f"cannot read {path}: {error.strerror or error}") from None
    except TaskError as error:
        if error.field == "input.format" and error.fix.startswith("set input.format: "):
            fix = f"pass --format {error.fix.removeprefix('set input.format: ')}"
            raise TaskError(task, "input", error.problem, fix) from None  # a config's words
        if error.field != "input.encoding":
            raise
        # the reader's own words (`... is not UTF-8: byte 0xe9 on line 3`), predict's fix
        fix = "pass --encoding with the file's (e.g. latin-1, cp1252, utf-16), or save it as UTF-8"
        raise TaskError(task, "input", error.problem, fix) from None
    if raw.skipped:
        fix = "fix or remove them (one prediction is written per input row)"
        if raw.looks_quoted is not None:  # a row broken by a quoted line break, read unquoted
            fix += f", or pass --quotes: line {raw.looks_quoted} looks written with quotes"
        problem = f"{plural(raw.skipped, 'malformed row')} in {path} ({skip_places(raw, [])})"
        raise TaskError(task, "input", problem, fix)
    return raw


def _input_format(task: str, path: Path, fmt: str | None) -> str:
    """`fmt`, else the format of `path`'s suffix; one `data/` reads."""
    if fmt is not None and fmt not in FORMATS:
        problem = f"unknown format {fmt!r} for {path.name}"
        raise TaskError(task, "--format", problem, f"use one of {', '.join(FORMATS)}")
    fmt = fmt or EXTENSIONS.get(path.suffix.lower())
    if fmt is None:
        suffix = f"its suffix {path.suffix!r}" if path.suffix else "a name without a suffix"
        raise TaskError(
            task,
            "input",
            f"no format known for {path.name} ({suffix})",
            FORMAT_FIX,
        )
    return fmt


def _input_source(
    spec: TaskSpec,
    path: Path,
    fmt: str,
    header: bool,
    columns: Sequence[str] | None,
    quotes: bool | None,
    encoding: str | None,
) -> SplitSource:
    if isinstance(columns, str):  # from Python: read as one column per character
        names = [c.strip() for c in columns.split(",")]
        problem = f"expected a list of column names, got the str {columns!r}"
        raise TaskError(spec.name, "columns", problem, f"give {names!r}")
    for option, value in (("--columns", columns), ("--quotes", quotes)):
        if value not in (None, []) and fmt not in ("tsv", "csv"):
            raise TaskError(spec.name, option, f"only for tsv/csv files, not {fmt}")
    if encoding is not None and fmt == "parquet":
        raise TaskError(spec.name, "--encoding", "only for text files (tsv, csv, jsonl, json)")
    encoding = parse_encoding(partial(_encoding_error, spec.name), "input", encoding)
    if columns and header:
        raise TaskError(
            spec.name,
            "--columns",
            "names the columns of a tsv/csv without header, and the input is read as having one",
            "pass --no-header with --columns (a file with a header names its own columns)",
        )
    if not header and fmt in ("tsv", "csv"):
        declared = next((s.columns for s in (spec.train, spec.dev) if s and s.columns), None)
        columns = columns or declared
        if not columns:
            raise TaskError(
                spec.name, "--columns", "a file without header needs its column names", "name them"
            )
    named = tuple(columns) if columns and not header else None
    if quotes is None:  # read as the task's own files of that format are
        given = [
            s for s in (spec.train, spec.dev) if s and s.format == fmt and s.quotes is not None
        ]
        quotes = given[0].quotes if given else None
    return SplitSource(path, fmt, header, named, encoding, quotes=quotes)


def _encoding_error(task: str, _key: str, problem: str, fix: str = "") -> TaskError:
    """`parse_encoding`'s refusal of a `--encoding`, named as the option."""
    return TaskError(task, "--encoding", problem, fix or "e.g. utf-8, latin-1, cp1252, utf-16")


def _check_fields(
    task: str, path: Path, fields: Sequence[str], present: Sequence[str], fmt: str, header: bool
) -> None:
    """Every text field the task declares must be a column of the file; the fix depends on
    where the names came from (a header line, --columns, the file's own keys)."""
    for name in fields:
        if name not in present:
            there = f"columns there: {', '.join(present) or '(none)'}"
            if fmt not in ("tsv", "csv"):
                fix = f"{there}; give a file with the task's fields {list(fields)}"
            elif header:
                fix = (
                    f"{there} (its first line); name a header column {name!r}, or, if that line "
                    f"is a row, pass --no-header (and --columns)"
                )
            else:
                fix = f"{there}; name the columns with --columns, one of them {name!r}"
            problem = f"not found in {path}{other_case(name, present)}"
            raise TaskError(task, f"input column {name!r}", problem, fix)


def _id_field(task: str, path: Path, id_field: str | None, present: Sequence[str]) -> str | None:
    """The id column: the one asked for (which must exist), else the first of `ID_FIELDS`."""
    id_field = id_field or next((c for c in ID_FIELDS if c in present), None)
    if id_field is not None and id_field not in present:
        there = f"columns there: {', '.join(present) or '(none)'}"
        raise TaskError(
            task,
            "--id-field",
            f"column {id_field!r} not found in {path}",
            f"{there}; give one of them",
        )
    return id_field


def id_text(value: Any) -> str | None:
    """A row's id as text, as the output writes it whatever its type in the input (a Parquet
    timestamp, bytes or Decimal is no JSON): `str` of it; a whole float as an integer (a
    pandas column of ids with a gap is float); bytes as UTF-8 where they are; a missing or NaN
    id is None, written as null (JSON lines) or an empty cell (CSV)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, bytes):
        with contextlib.suppress(UnicodeDecodeError):
            return value.decode("utf-8")
    return str(value)


def _texts(
    spec: TaskSpec, path: Path, number: int, row: dict[str, Any], fields: Sequence[str]
) -> tuple[str, ...]:
    task = spec.name
    if spec.is_multiple_choice:
        texts = record_texts(spec, row, RowRef(spec, "input", str(path), number))
        if texts is None:
            problem = (
                f"a value of {[c for _, c in spec.choice_layout.columns()]} is missing or empty"
            )
            raise TaskError(task, f"input row {number}", problem, "fill it in or remove the row")
        return texts
    where = RowRef(spec, "input", str(path), number)
    texts = []
    for name in fields:
        text = cell_text(row.get(name), f"column {name!r}", where)
        if text is None:
            what = "no value" if row.get(name) is None else "an empty value"
            raise TaskError(
                task,
                f"input row {number}",
                f"{what} for {name!r} in {path}",
                "fill it in or remove the row",
            )
        texts.append(text)
    return tuple(texts)


def input_labels(
    spec: TaskSpec, path: Path, rows: Sequence[dict[str, Any]]
) -> list[tuple[str, ...]] | None:
    """Each row's own labels of its choices (`choices.labels`, CommonsenseQA's), in choice
    order: `predict` names a row's prediction and its `prob_<label>` by them, as training
    resolves the answer by them. None when the task has no such column or the input holds it in
    no row (its choices are then named by position in label_names). A row is refused where
    training refuses it (a count other than its choices', a label named twice, labels that are
    not the task's label_names) and where it lacks the labels that other rows have."""
    column = spec.choice_layout.labels_column if spec.is_multiple_choice else None
    if column is None or not any(holds(row, column) for row in rows):
        return None
    out = []
    for number, row in enumerate(rows, start=1):
        where = RowRef(spec, "input", str(path), number)
        labels = labels_of(spec, row, where)
        if labels is None:
            problem = f"no value for {column!r} (choices.labels) in {path}, which other rows have"
            raise TaskError(
                spec.name, f"input row {number}", problem, "fill it in or remove the row"
            )
        out.append(labels)
    return out


def encode_input(
    data: PredictionInput, spec: TaskSpec, tokenizer: Any, max_length: int
) -> TokenizedSplit:
    """Tokenise the rows exactly as training does (pairs as pairs, multiple choice per choice)."""
    import datasets

    from adapterfleet.data.cache import TokenizedSplit, encode_rows  # loads numpy

    if spec.is_multiple_choice:
        columns: dict[str, list[Any]] = {
            "question": [t[0] for t in data.texts],
            "choices": [list(t[1:]) for t in data.texts],
        }
    else:
        columns = {"text_a": [t[0] for t in data.texts]}
        if spec.is_pair:
            columns["text_b"] = [t[1] for t in data.texts]
    columns["label"] = [0] * len(data)
    table = encode_rows(
        datasets.Dataset.from_dict(columns), tokenizer, max_length, spec.is_multiple_choice
    )
    names = table.column_names
    return TokenizedSplit(
        task=spec.name,
        split="input",
        path=Path(data.source),
        key="",
        from_cache=False,
        input_ids=table.column("input_ids").to_pylist(),
        token_type_ids=(
            table.column("token_type_ids").to_pylist() if "token_type_ids" in names else None
        ),
        labels=table.column("label").to_pylist(),
        lengths=table.column("length").to_pylist(),
    )
