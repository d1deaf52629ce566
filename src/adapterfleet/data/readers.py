"""Reading one split's raw rows from a local file (tsv, csv, jsonl, json, parquet)."""

from __future__ import annotations

import csv
import dataclasses
import json
import stat
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from adapterfleet.data.encodings import reading_codec
from adapterfleet.data.errors import TaskError
from adapterfleet.data.tasks import SplitSource

_CSV_FIELD_LIMIT = 2**31 - 1


@dataclass
class RawSplit:
    """Rows of one split as read, before field mapping. ``bad_lines`` holds a few examples;
    ``repeated`` names each column that appears twice (in the header, or among the keys of a
    record) and where, so that a task reading it is refused (`quality.check_once`)."""

    source: str
    columns: list[str]
    rows: list[dict[str, Any]]
    skipped: int = 0
    bad_lines: list[int] = field(default_factory=list)
    repeated: dict[str, str] = field(default_factory=dict)
    # each skipped record: (the number of rows read before it, its line or record number)
    skips: list[tuple[int, int]] = field(default_factory=list)

    def renamed(self, task: str, split: str, rename: dict[str, str]) -> RawSplit:
        """Apply ``rename`` (old -> new); an old name that is not a column is a `TaskError`."""
        if not rename:
            return self
        for old in rename:
            if old not in self.columns:
                raise TaskError(
                    task,
                    f"{split}.rename",
                    f"column {old!r} not found in {self.source}",
                    f"columns there: {', '.join(self.columns)}",
                )
            if rename[old] in self.columns and rename[old] not in rename:
                raise TaskError(
                    task,
                    f"{split}.rename",
                    f"{old!r} -> {rename[old]!r}, but {self.source} has a column "
                    f"{rename[old]!r} too; only one would be read",
                    "rename that one as well, or name another column",
                )
        rows = [{rename.get(k, k): v for k, v in row.items()} for row in self.rows]
        columns = [rename.get(c, c) for c in self.columns]
        repeated = {rename.get(k, k): v for k, v in self.repeated.items()}
        return dataclasses.replace(self, columns=columns, rows=rows, repeated=repeated)


def read_file(task: str, split: str, source: SplitSource) -> RawSplit:
    """Read a file split; malformed rows are skipped and counted, not raised."""
    path = source.path
    assert path is not None and source.format is not None
    _check_readable(task, split, path)
    encoding = reading_codec(source.encoding)
    try:
        if source.format in ("tsv", "csv"):
            raw = _read_delimited(path, source, encoding)
        elif source.format == "jsonl":
            raw = _read_jsonl(path, encoding)
        elif source.format == "json":
            raw = _read_json(task, split, path, encoding)
        else:
            raw = _read_parquet(task, split, path)
    except UnicodeError as exc:  # a decode error, or a codec's own (UTF-16 without its BOM)
        problem = f"{path} is not {source.encoding} ({getattr(exc, 'reason', exc)})"
        raise TaskError(task, f"{split}.encoding", problem, f"set {split}.encoding") from None
    except OSError as exc:
        problem = f"cannot read {path} ({exc.strerror or type(exc).__name__})"
        raise TaskError(task, f"{split}.path", problem, "check the file's permissions") from None
    return raw.renamed(task, split, source.rename)


def _check_readable(task: str, split: str, path: Path) -> None:
    """A missing path is not found; a symlink loop or a folder that cannot be entered says so."""
    try:
        is_file = stat.S_ISREG(path.stat().st_mode)
    except FileNotFoundError:
        is_file = False
    except OSError as exc:
        problem = f"cannot read {path} ({exc.strerror or type(exc).__name__})"
        raise TaskError(task, f"{split}.path", problem, "fix the path") from None
    if not is_file:
        raise TaskError(task, f"{split}.path", f"file not found: {path}", "check data_root/path")
    if path.stat().st_size == 0 and _reads_nothing(path):  # /proc files say 0 and hold text
        raise TaskError(task, f"{split}.path", f"{path} is empty (0 bytes)", "give it its rows")


def _reads_nothing(path: Path) -> bool:
    """The file gives no byte; one that cannot be read is left to the reader, which says so."""
    try:
        with path.open("rb") as handle:
            return handle.read(1) == b""
    except OSError:
        return False


def _read_delimited(path: Path, source: SplitSource, encoding: str) -> RawSplit:
    csv.field_size_limit(_CSV_FIELD_LIMIT)
    with path.open(encoding=encoding, newline="") as handle:
        if source.format == "tsv":
            reader = csv.reader(handle, delimiter="\t", quoting=csv.QUOTE_NONE)
        else:
            reader = csv.reader(handle)
        columns = list(source.columns) if source.columns else None
        raw = RawSplit(str(path), columns or [], [])
        end = 0  # the last line of the record before
        for row in reader:
            start, end = end + 1, reader.line_num
            if not row:
                continue
            if columns is None:
                columns = [name.strip() for name in row]
                raw.columns = columns
                _note_repeats(raw, columns, f"header line {reader.line_num}")
                continue
            if len(row) != len(columns):
                # a quote left open swallows the lines up to the next quote (or the end): each
                # counts, so the skip limit sees them, and the record is named by its first line
                _bad(raw, start, lines=end - start + 1)
                continue
            raw.rows.append(dict(zip(columns, row, strict=True)))
    return raw


def _read_jsonl(path: Path, encoding: str) -> RawSplit:
    raw = RawSplit(str(path), [], [])
    with path.open(encoding=encoding) as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                record, too_long = _parse_json(line)
            except json.JSONDecodeError:
                record, too_long = None, False
            if not isinstance(record, dict) or too_long:
                _bad(raw, number)
                continue
            _note_repeats(raw, record, f"line {number}")
            raw.rows.append(record)
    raw.columns = _union_keys(raw.rows)
    return raw


def _read_json(task: str, split: str, path: Path, encoding: str) -> RawSplit:
    try:
        document, too_long = _parse_json(path.read_text(encoding=encoding))
    except json.JSONDecodeError as exc:
        raise TaskError(task, f"{split}.path", f"{path} is not valid JSON ({exc})") from None
    fix = 'use a list of records or an object of records {"0": {...}, "1": {...}}'
    if isinstance(document, _Record) and document.repeats:
        again = document.repeats[0]
        problem = f"{path} holds the record key {again!r} twice; only one of them would be read"
        raise TaskError(task, f"{split}.path", problem, "give each record its own key")
    if isinstance(document, dict):
        records: list[Any] = list(document.values())
    elif isinstance(document, list):
        records = document
    else:
        raise TaskError(task, f"{split}.path", f"{path} holds no records", fix)
    raw = RawSplit(str(path), [], [])
    for number, record in enumerate(records, start=1):
        if isinstance(record, dict) and not (too_long and _holds_long(record)):
            _note_repeats(raw, record, f"record {number}")
            raw.rows.append(record)
        else:
            _bad(raw, number)
    if records and not raw.rows:
        raise TaskError(task, f"{split}.path", f"no record in {path} is a JSON object", fix)
    raw.columns = _union_keys(raw.rows)
    return raw


def _read_parquet(task: str, split: str, path: Path) -> RawSplit:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except (pa.ArrowInvalid, OSError) as exc:
        raise TaskError(task, f"{split}.path", f"{path} is not a Parquet file ({exc})") from None
    raw = RawSplit(str(path), list(table.column_names), table.to_pylist())
    _note_repeats(raw, table.column_names, "the Parquet schema")
    return raw


class _LongInt(str):
    """The digits of a JSON integer longer than Python converts (`sys.get_int_max_str_digits`,
    4,300 digits by default): its record is malformed, like one that is not JSON."""


def _parse_json(text: str) -> tuple[Any, bool]:
    """The JSON value of `text` (each object a `_Record`), and whether it holds an integer too
    long for Python (then kept as `_LongInt`). A syntax error, or nesting deeper than Python's
    recursion limit, raises `json.JSONDecodeError`."""
    try:
        return json.loads(text, object_pairs_hook=_Record), False
    except json.JSONDecodeError:
        raise
    except RecursionError:
        raise json.JSONDecodeError("nested deeper than Python reads", text, 0) from None
    except ValueError:  # "Exceeds the limit (4300 digits) for integer string conversion"
        return json.loads(text, object_pairs_hook=_Record, parse_int=_long_int), True


def _long_int(digits: str) -> int | _LongInt:
    try:
        return int(digits)
    except ValueError:
        return _LongInt(digits)


def _holds_long(value: Any) -> bool:
    """Whether `value` (a JSON value) holds a `_LongInt` anywhere."""
    if isinstance(value, dict | list):
        return any(_holds_long(v) for v in (value.values() if isinstance(value, dict) else value))
    return isinstance(value, _LongInt)


class _Record(dict):
    """A JSON object that remembers the keys it held twice (`json` keeps the last of two equal
    keys): ``repeats``, empty for almost every record."""

    repeats: tuple[str, ...] = ()

    def __init__(self, pairs: list[tuple[str, Any]]) -> None:
        super().__init__(pairs)
        if len(self) != len(pairs):
            self.repeats = tuple(k for k, n in Counter(k for k, _ in pairs).items() if n > 1)


def _note_repeats(raw: RawSplit, names: Iterable[str] | _Record, where: str) -> None:
    """Record (the first place of) every name that `names` (a header, a JSON record's keys)
    holds more than once."""
    if isinstance(names, _Record):
        repeats: Iterable[str] = names.repeats
    else:
        repeats = [name for name, count in Counter(names).items() if count > 1]
    for name in repeats:
        raw.repeated.setdefault(name, where)


def _bad(raw: RawSplit, line: int, lines: int = 1) -> None:
    """A malformed record at `line` that took `lines` lines of the file: as many skipped rows."""
    raw.skipped += lines
    raw.skips.extend([(len(raw.rows), line)] * lines)
    if len(raw.bad_lines) < 5:
        raw.bad_lines.append(line)


def _union_keys(rows: Iterable[dict[str, Any]]) -> list[str]:
    seen: dict[str, None] = {}
    for row in rows:
        for key in row:
            seen.setdefault(key, None)
    return list(seen)
