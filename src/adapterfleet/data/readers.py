"""Reading one split's raw rows from a local file (tsv, csv, jsonl, json, parquet)."""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import json
import logging
import re
import stat
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from adapterfleet.data.blank import blank_file
from adapterfleet.data.compressed import refuse_compressed
from adapterfleet.data.encodings import reading_codec
from adapterfleet.data.errors import TaskError
from adapterfleet.data.sources import SplitSource

_CSV_FIELD_LIMIT = 2**31 - 1
_SPACE = re.compile(r"\s*")
logger = logging.getLogger(__name__)


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
    bad_unit: str = "lines"  # what `bad_lines` counts: a JSON document's are records
    # a file read without quoting: the first line of a record whose fields look quoted, if any
    looks_quoted: int | None = None

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
    use = "pass the result as --input" if split == "input" else "point the config at the result"
    refuse_compressed(task, f"{split}.path", path, use)
    encoding = reading_codec(source.encoding)
    if (blank := blank_file(path, encoding)) is not None:  # no header, no record: no columns
        raise TaskError(task, f"{split}.path", f"{path} is empty ({blank})", "give it its rows")
    try:
        if source.format in ("tsv", "csv"):
            raw = _read_delimited(path, source, encoding)
        elif source.format == "jsonl":
            raw = _read_jsonl(path, encoding)
            _check_json_lines(task, split, raw, path, encoding)
        elif source.format == "json":
            raw = _read_json(task, split, path, encoding)
        else:
            raw = _read_parquet(task, split, path)
    except UnicodeError as exc:  # a decode error, or a codec's own (UTF-16 without its BOM)
        problem = _not_decoded(path, source.encoding, encoding, exc)
        fix = f"set {split}.encoding to the file's, e.g. latin-1, cp1252 or utf-16"
        raise TaskError(task, f"{split}.encoding", problem, fix) from None
    except OSError as exc:
        problem = f"cannot read {path} ({exc.strerror or type(exc).__name__})"
        raise TaskError(task, f"{split}.path", problem, "check the file's permissions") from None
    if raw.looks_quoted is not None:
        _warn_quoted(task, split, source, raw.looks_quoted)
    return raw.renamed(task, split, source.rename)


def _warn_quoted(task: str, split: str, source: SplitSource, line: int) -> None:
    """Said, not refused: a bare quote is text in GLUE's TSV files, so a field that looks
    quoted may be either; the fix is one key."""
    fix = "pass predict --quotes" if split == "input" else f"set {split}.quotes: true"
    logger.warning(
        "task %r, %s: %s is read without quotes (a %s's default), but line %d looks written with "
        'them ("..." around a field, "" for a quote in it): its quotes would stay in the text, '
        "and a row holding a line break would be lost; %s if a program (pandas, Excel, "
        "csv.writer) wrote the file",
        task,
        split,
        source.path,
        source.format,
        line,
        fix,
    )


def _not_decoded(path: Path, named: str, codec: str, error: UnicodeError) -> str:
    """What failed to decode, and where: the first bad byte's line and value, decoded again
    from the whole file (a reader's error counts from the chunk it read)."""
    shown = "UTF-8" if codec == "utf-8-sig" else named  # the default, and utf-8 as it is read
    data = path.read_bytes()
    if data[:2] in (b"\xff\xfe", b"\xfe\xff"):
        return f"{path} is not {shown}: it starts with a UTF-16 byte-order mark"
    try:
        data.decode(codec)
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        byte = data[exc.start : exc.start + 1].hex()
        return f"{path} is not {shown}: byte 0x{byte} on line {line} ({exc.reason})"
    except UnicodeError:
        pass
    return f"{path} is not {shown} ({getattr(error, 'reason', error)})"


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
        raise TaskError(
            task,
            f"{split}.path",
            f"file not found: {path}",
            "check data_root/path (relative ones are read from the folder of the YAML file "
            "that declares the task, -o data_root=... too, not from the working folder)",
        )
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
        delimiter = "\t" if source.format == "tsv" else ","
        quoting = csv.QUOTE_MINIMAL if source.quoted else csv.QUOTE_NONE
        reader = csv.reader(handle, delimiter=delimiter, quoting=quoting)
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
            if not source.quoted and raw.looks_quoted is None and _looks_quoted(row, columns):
                raw.looks_quoted = start
            if len(row) != len(columns):
                # a quote left open swallows the lines up to the next quote (or the end): each
                # counts, so the skip limit sees them, and the record is named by its first line
                _bad(raw, start, lines=end - start + 1)
                continue
            raw.rows.append(dict(zip(columns, row, strict=True)))
    return raw


def _looks_quoted(row: list[str], columns: list[str]) -> bool:
    """A field written with quotes, as pandas, Excel and `csv.writer` write one that holds a
    quote (the field between quotes, each quote in it doubled), or a line break (a row broken in
    two, its first part opening a quote): read without quoting, the quotes stay in the text, and
    a broken row is lost."""
    if any(len(f) > 3 and f[0] == f[-1] == '"' and '""' in f[1:-1] for f in row):
        return True
    return len(row) != len(columns) and any(f.startswith('"') and f.count('"') % 2 for f in row)


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


def _check_json_lines(task: str, split: str, raw: RawSplit, path: Path, encoding: str) -> None:
    """A file of JSON lines of which no line is a record may be one JSON document: a list of
    records, or records written over several lines (`json.dump(..., indent=2)`)."""
    if raw.rows or not raw.skipped:
        return
    text = path.read_text(encoding=encoding)
    document = None
    with contextlib.suppress(RecursionError, ValueError):  # JSONDecodeError is a ValueError
        document = json.loads(text)
    if isinstance(document, list | dict):
        problem = f"{path} is one JSON document, not JSON lines (one record a line)"
        raise TaskError(task, f"{split}.format", problem, f"set {split}.format: json")
    if _records_over_lines(text):
        problem = f"{path} holds records written over several lines, not one record a line"
        fix = "write each record on one line (json.dumps without indent)"
        raise TaskError(task, f"{split}.format", problem, fix)


def _json_lines(text: str) -> bool:
    """Whether `text` is two or more lines, each one JSON object."""
    lines = [line for line in text.splitlines() if line.strip()]
    with contextlib.suppress(ValueError, RecursionError):
        return len(lines) > 1 and all(isinstance(json.loads(line), dict) for line in lines)
    return False


def _records_over_lines(text: str) -> bool:
    """Whether `text` is JSON objects one after another (each `json.dump(..., indent=2)`)."""
    decoder, at, found = json.JSONDecoder(), 0, False
    while (at := _SPACE.match(text, at).end()) < len(text):  # type: ignore[union-attr]
        try:
            value, at = decoder.raw_decode(text, at)
        except (ValueError, RecursionError):
            return False
        if not isinstance(value, dict):
            return False
        found = True
    return found


def _read_json(task: str, split: str, path: Path, encoding: str) -> RawSplit:
    try:
        document, too_long = _parse_json(path.read_text(encoding=encoding))
    except json.JSONDecodeError as exc:
        if _json_lines(path.read_text(encoding=encoding)):  # pandas' to_json(lines=True)
            problem = f"{path} holds JSON lines (one record a line), not one JSON document"
            fix = f"set {split}.format: jsonl"
            raise TaskError(task, f"{split}.format", problem, fix) from None
        raise TaskError(task, f"{split}.path", f"{path} is not valid JSON ({exc})") from None
    fix = 'use a list of records or an object of records {"0": {...}, "1": {...}}'
    if isinstance(document, _Record) and document.repeats:
        again = document.repeats[0]
        problem = f"{path} holds the record key {again!r} twice; only one of them would be read"
        raise TaskError(task, f"{split}.path", problem, "give each record its own key")
    if isinstance(document, dict) and _by_column(document):
        problem = f"{path} holds columns of values ({{column: {{row: value}}}}), not records"
        fix = "save it with one record per row, e.g. pandas' to_json(orient='records')"
        raise TaskError(task, f"{split}.path", problem, fix)
    if isinstance(document, dict):
        records: list[Any] = list(document.values())
    elif isinstance(document, list):
        records = document
    else:
        raise TaskError(task, f"{split}.path", f"{path} holds no records", fix)
    raw = RawSplit(str(path), [], [], bad_unit="records")
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


def _by_column(document: dict[str, Any]) -> bool:
    """pandas' default JSON (`orient='columns'`): each key a column name, each value a mapping
    of the same row numbers to values. An object of records keys records by id instead."""
    inner = list(document.values())
    if not inner or not all(isinstance(v, dict) and v for v in inner):
        return False
    keys = set(inner[0])
    rows = all(set(v) == keys for v in inner) and all(k.isdigit() for k in keys)
    return rows and not all(k.isdigit() for k in document)


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
