"""What the rows of a split must be before a task trains on them (issue #22, "bad data").

Each decision, and why:

- **A text cell holds text.** A list, a mapping, a boolean or a number in a text column is
  refused with its record: its Python repr (`['a', 'b']`, `{'x': 1}`, `True`, `42`) is never the
  text anyone meant, and a numeric column named as a text field (an `idx`, a `year`, a label) is
  a mistake in the declaration. A multiple-choice *choice* may be a number ("How many legs has a
  spider?" [6, 8]): there a number is its text.
- **An empty text cell** (or one of spaces) skips its row, like a missing value: the row holds no
  example. So does an empty label cell: a CSV or TSV leaves a missing label as "", where JSON and
  Parquet hold null, and the row is skipped in every format. Skipped rows are counted, and
  bounded by the next rule. In a multiple-choice row an empty choice skips the row too (a
  CSV's empty cell was kept as a choice "", the same row in JSON skipped), and so does a
  context that is empty as a whole.
- **At most `max_skipped_fraction`** (a task key, default `SKIP_LIMIT`, 0.1) of a split's records
  may be skipped (malformed lines, missing or empty values). More is a wrong format, delimiter,
  column or encoding, not a few bad rows: refused with the count, the threshold and the first
  places. (A split left with no row at all is the "split is empty" error.)
- **A column the task reads appears once** in the header (a JSON record: once among its keys);
  a reader keeps only one of two equal names, so the task would silently read one of them.
  Columns the task does not read may repeat.
- **A training split holds two labels or more** (classification), two different numbers
  (regression): a model learns nothing from one. Multiple choice scores every choice with the
  same weights, so one answer position throughout is no such problem and is not checked.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from adapterfleet.console import plural
from adapterfleet.data.errors import TaskError
from adapterfleet.data.numbers import parse_fraction

if TYPE_CHECKING:
    from adapterfleet.data.readers import RawSplit
    from adapterfleet.data.tasks import TaskSpec

SKIP_KEY = "max_skipped_fraction"
SKIP_LIMIT = 0.1
_KINDS = (
    (bool, "a boolean"),
    (int | float, "a number"),
    (list | tuple, "a list"),
    (dict, "a mapping"),
)


@dataclass(frozen=True)
class RowRef:
    """One record of a split, for errors: `task 'x', <split> <key>: ... (record N of <file>)`."""

    spec: TaskSpec
    split: str
    source: str
    number: int

    def error(self, key: str, problem: str, fix: str) -> TaskError:
        text = f"{problem} (record {self.number} of {self.source})"
        return TaskError(self.spec.name, f"{self.split} {key}", text, fix)


def other_case(name: str, columns: Sequence[str]) -> str:
    """` ('Review' there differs only in case; names match exactly)` where a column of
    `columns` is `name` but for case, else ""."""
    found = [c for c in columns if c != name and c.casefold() == name.casefold()]
    return f" ({found[0]!r} there differs only in case; names match exactly)" if found else ""


def is_blank(value: Any) -> bool:
    """A missing value: None, or a cell of spaces (a CSV or TSV cell left empty is read as "",
    where JSON and Parquet hold null). Its row is skipped, whichever format it came in."""
    return value is None or (isinstance(value, str) and not value.strip())


def cell_text(
    value: Any, key: str, where: RowRef, *, numbers: bool = False, empty: bool = False
) -> str | None:
    """The text of one cell of a text column (`key` names it in errors); None when it is missing
    or (unless `empty`) empty, so the row is skipped. Anything but text (with `numbers`, a
    number) is refused."""
    if value is None:
        return None
    if isinstance(value, str):
        return value if empty or not is_blank(value) else None
    is_number = isinstance(value, int | float) and not isinstance(value, bool)
    if numbers and is_number:
        return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)
    kind = next((name for types, name in _KINDS if isinstance(value, types)), None)
    kind = kind or f"a {type(value).__name__}"
    shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
    if is_number or isinstance(value, bool):
        fix = "name a column of text, or write the value as a string in the file if it is text"
    else:
        fix = "name a column of text (a list of choices: type multiple_choice, choices.list)"
    raise where.error(key, f"holds {kind} ({shown}), not text", fix)


def check_once(spec: TaskSpec, split: str, raw: RawSplit, columns: Iterable[tuple]) -> None:
    """Every (key, column) the task reads appears once in the split's header or records."""
    for key, column in columns:
        top = column if column in raw.columns else column.split(".")[0]
        if top in raw.repeated:
            raise TaskError(
                spec.name,
                f"{split} column {top!r} ({key})",
                f"appears twice in {raw.source} ({raw.repeated[top]}); only one would be read",
                "give each column its own name in the file",
            )


def parse_skip_limit(fail: Any, value: Any) -> float | None:
    """A task's `max_skipped_fraction`: a number in [0, 1]; None (not given): `SKIP_LIMIT`."""
    if value is None:
        return None
    return parse_fraction(fail, SKIP_KEY, value, ends=True, example=SKIP_LIMIT)


def check_skipped(
    spec: TaskSpec, split: str, raw: RawSplit, kept: int, missing: Sequence[int]
) -> None:
    """Refuse a split when more than the task's limit of its records were skipped: malformed
    (`raw.bad_lines`, by line) or with a missing or empty value (`missing`, by record)."""
    skipped = raw.skipped + len(missing)
    total = kept + skipped
    limit = SKIP_LIMIT if spec.max_skipped_fraction is None else spec.max_skipped_fraction
    if not kept or skipped <= limit * total:
        return
    raise TaskError(
        spec.name,
        split,
        f"{skipped} of {total} records of {raw.source} ({skipped / total:.0%}) were skipped "
        f"({skip_places(raw, missing)}); more than {SKIP_KEY} {limit:g} is refused",
        f"check the file's format, delimiter, quotes, columns and encoding, or raise {SKIP_KEY}"
        + (
            f" (it looks written with quotes: set {split}.quotes: true)" if raw.looks_quoted else ""
        ),
    )


def skip_places(raw: RawSplit, missing: Sequence[int]) -> str:
    """Where the skipped records are: malformed ones by the file's line (a JSON document's by
    record), those with a value missing or empty by record (the data rows, from 1)."""
    places = []
    if raw.bad_lines:
        unit = "record" if raw.bad_unit == "records" else "line"
        places.append(f"malformed at {plural(raw.skipped, unit, bare=True)} ")
        places[-1] += _first(raw.bad_lines, raw.skipped)
    if missing:
        shown = _first(missing, len(missing))
        places.append(
            f"a value missing or empty in {plural(len(missing), 'record', bare=True)} {shown}"
        )
    return "; ".join(places)


def _first(numbers: Sequence[int], count: int) -> str:
    """The first five of `count` numbers (`numbers` may hold only those)."""
    return ", ".join(str(n) for n in numbers[:5]) + (", ..." if count > 5 else "")


def check_dev_values(spec: TaskSpec, rows: Sequence[tuple[Any, ...]]) -> None:
    """A regression task's dev rows hold two values or more: on one, Pearson and Spearman are
    undefined (they read 0.0000 every epoch, so the best epoch was the first) and always
    answering it scores an MSE of 0."""
    values = {row[-1] for row in rows}
    if not spec.is_regression or len(values) != 1 or len(rows) < 2:
        return
    raise TaskError(
        spec.name,
        f"dev {spec.label_field!r}",
        f"all {len(rows)} dev rows have the label value {next(iter(values)):g}; no correlation "
        "can be measured on one value, and answering it always scores an MSE of 0",
        "give dev rows of several values (max_dev_examples or dev_fraction may have left one)",
    )


def check_labels(spec: TaskSpec, rows: Sequence[tuple[Any, ...]]) -> None:
    """The training rows hold at least two labels (classification) or values (regression)."""
    labels = {row[-1] for row in rows}
    if spec.is_multiple_choice or len(labels) != 1:
        return
    (only,) = labels
    shown = f"{only:g}" if spec.is_regression else repr(spec.label_names[only])
    what = "label value" if spec.is_regression else "label"
    raise TaskError(
        spec.name,
        f"train {spec.label_field!r}",
        f"all {len(rows)} training rows have the {what} {shown}; a model learns nothing from one",
        "check label_field and the file (rows:, max_train_examples or dev_fraction may have "
        "left one class only)",
    )
