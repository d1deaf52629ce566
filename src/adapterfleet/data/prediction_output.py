"""What `adapterfleet predict` writes: one row per input row, as JSON lines, CSV, TSV or
Parquet (the formats it reads), checked before any work and written whole or not at all."""

from __future__ import annotations

import csv
import json
import os
import sys
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from adapterfleet.data.errors import TaskError

if TYPE_CHECKING:
    import torch

    from adapterfleet.data.prediction_input import PredictionInput

OUTPUT_FORMATS = {
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".csv": "csv",
    ".tsv": "tsv",
    ".parquet": "parquet",
}


STDOUT = "-"  # `--out -`: JSON lines to standard output


def output_name(out: Path) -> str:
    """`out` as the last line of predict names it."""
    return "standard output" if str(out) == STDOUT else str(out)


def output_format(out: Path) -> str:
    """`jsonl`, `csv`, `tsv` or `parquet`, from the suffix of `out`; JSON lines for standard
    output (`-`)."""
    if str(out) == STDOUT:
        return "jsonl"
    fmt = OUTPUT_FORMATS.get(Path(out).suffix.lower())
    if fmt is None:
        suffix = Path(out).suffix or "(none)"
        problem = f"unknown suffix {suffix!r} of {out}"
        raise TaskError(None, "--out", problem, f"use one of {', '.join(OUTPUT_FORMATS)}")
    return fmt


def check_output(out: Path, input_path: Path) -> str:
    """`output_format(out)`, once `out` is known to be writable as a file that is not the
    input: checked before the input is read or a model pulled, so a mistake costs nothing."""
    fmt = output_format(out)
    if str(out) == STDOUT:
        return fmt
    out, input_path = Path(out), Path(input_path)
    if out.is_dir():
        raise TaskError(None, "--out", f"{out} is a folder", f"give a file name ending in {fmt!r}")
    if out.exists() and input_path.exists() and out.samefile(input_path):
        problem = "is the --input file, and writing the predictions would replace the rows"
        raise TaskError(None, "--out", f"{out} {problem} they are made from", "give another file")
    _check_writable(out)
    return fmt


def _check_writable(out: Path) -> None:
    """A file can be made where `out` goes (in its folder, or the nearest one there is: the
    write makes the missing ones), tried with a nameless temporary file before any row is
    predicted: an unwritable `--out` failed only at the end, after all the work."""
    folder = out.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    try:
        if not folder.is_dir():
            raise NotADirectoryError(20, f"{folder} is a file")
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as error:
        problem = f"{out} cannot be written ({error.strerror or error})"
        raise TaskError(
            None, "--out", problem, "give a file in a folder you can write to"
        ) from None


def _partial(path: Path) -> Path:
    return path.with_name(f".{path.name}.{os.getpid()}.partial")


def output_columns(
    data: PredictionInput, label_names: Sequence[str], regression: bool = False
) -> dict[str, str]:
    """The output's columns and their Parquet types, as `prediction_rows` writes them: what a
    file of no rows holds (a CSV's header line, a Parquet file's schema)."""
    columns = {"row": "int64", **({"id": "string"} if data.ids is not None else {})}
    columns["prediction"] = "double" if regression else "string"
    if not regression:
        columns.update({f"prob_{name}": "double" for name in label_names})
    return columns


def prediction_rows(
    data: PredictionInput,
    probabilities: torch.Tensor,
    label_names: Sequence[str],
    regression: bool = False,
) -> Iterator[dict[str, Any]]:
    """One output row per input row, in input order; `regression`: `probabilities` holds the
    head's numbers (rows, 1) and `prediction` is that number. A multiple-choice input with its
    rows' own labels (`data.labels`) is named by them: `prob_A` is the probability of the choice
    labelled A in that row, wherever it stands; the columns are in `label_names`' order."""
    if regression:
        for index, value in enumerate(probabilities.reshape(-1).tolist()):
            row: dict[str, Any] = {"row": index}
            if data.ids is not None:
                row["id"] = data.ids[index]
            yield {**row, "prediction": value}
        return
    predicted = probabilities.argmax(dim=-1).tolist()
    for index, (label, probs) in enumerate(zip(predicted, probabilities.tolist(), strict=True)):
        row = {"row": index}
        if data.ids is not None:
            row["id"] = data.ids[index]
        # a multiple-choice row's own labels name its choices (CommonsenseQA's E, D, C, B, A)
        names = data.labels[index] if data.labels is not None else label_names
        by_name = dict(zip(names, probs, strict=True))
        row["prediction"] = names[label]
        row.update({f"prob_{name}": by_name[name] for name in label_names})
        yield row


def write_predictions(
    path: Path, fmt: str, rows: Iterable[dict[str, Any]], columns: dict[str, str] | None = None
) -> int:
    """Write `rows` as `fmt` (`output_format`) with `columns` (`output_columns`: a CSV's
    header, a Parquet file's schema, there with no row too; None: the first row's); returns the
    row count. Written beside `path` and moved onto it at the end: a reader never sees half a
    file, and a failure leaves what was at `path` before. `-`: JSON lines to standard output,
    as they come."""
    if str(path) == STDOUT:
        return _to_stdout(rows)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = _partial(path)
    try:
        if fmt == "parquet":
            count = _write_parquet(partial, rows, columns)
        else:
            with partial.open("w", encoding="utf-8", newline="") as handle:
                count = _write_text(handle, fmt, rows, columns)
        os.replace(partial, path)
    except OSError as error:  # a disk that filled up while the rows were written
        problem = f"writing {path} failed ({error.strerror or error})"
        raise TaskError(None, "--out", problem, "what was there is kept") from None
    finally:
        partial.unlink(missing_ok=True)
    return count


def _write_text(
    handle: Any, fmt: str, rows: Iterable[dict[str, Any]], columns: dict[str, str] | None
) -> int:
    count = 0
    writer: csv.DictWriter | None = None
    if fmt != "jsonl" and columns is not None:
        writer = _csv_writer(handle, fmt, list(columns))
    for row in rows:
        if fmt == "jsonl":
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
        else:
            writer = writer or _csv_writer(handle, fmt, list(row))
            writer.writerow(row)
        count += 1
    return count


def _csv_writer(handle: Any, fmt: str, columns: list[str]) -> csv.DictWriter:
    """A CSV (TSV) writer of `columns` whose header line is written."""
    writer = csv.DictWriter(handle, fieldnames=columns, delimiter="\t" if fmt == "tsv" else ",")
    writer.writeheader()
    return writer


def _write_parquet(
    partial: Path, rows: Iterable[dict[str, Any]], columns: dict[str, str] | None
) -> int:
    """One table of the rows, typed by `columns` (an id column of text; None: as the rows'
    values are)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    pairs = (columns or {}).items()
    schema = (
        pa.schema([(name, pa.type_for_alias(kind)) for name, kind in pairs]) if columns else None
    )
    table = pa.Table.from_pylist(list(rows), schema=schema)
    pq.write_table(table, partial)
    return table.num_rows


def _to_stdout(rows: Iterable[dict[str, Any]]) -> int:
    count = 0
    for row in rows:
        sys.stdout.write(json.dumps(row, ensure_ascii=False) + "\n")
        count += 1
    sys.stdout.flush()
    return count
