"""`rows: [start, stop]` on a split: one file gives a task both its train and its dev rows
(CommonsenseQA ships only its dev file: e.g. rows [0, 1000] train, [1000, null] dev)."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from adapterfleet.data.errors import TaskError

if TYPE_CHECKING:
    from adapterfleet.data.readers import RawSplit

Rows = tuple[int, int | None]
_FIX = "[start, stop] with 0 <= start < stop (0-based, stop excluded; null: to the end)"


def row_range(fail: Callable[..., TaskError], key: str, raw: Any) -> Rows | None:
    """A split's `rows:` as (start, stop), validated; None when not given."""
    if raw is None:
        return None
    ok = isinstance(raw, list) and len(raw) == 2
    ok = ok and all(v is None or (isinstance(v, int) and not isinstance(v, bool)) for v in raw)
    if not ok or raw[0] is None or raw[0] < 0 or (raw[1] is not None and raw[1] <= raw[0]):
        raise fail(f"{key}.rows", f"expected a row range, got {raw!r}", _FIX)
    return raw[0], raw[1]


def check_rows_apart(
    fail: Callable[..., TaskError], train: Rows | None, dev: Rows | None, *, same: bool
) -> None:
    """Slices of one source for train and dev must not overlap (dev rows would be trained on).
    Without any `rows:` the two are whatever the config says (tests read one file twice)."""
    if not same or (train is None and dev is None):
        return
    a, b = train or (0, None), dev or (0, None)
    if a[0] < _end(b) and b[0] < _end(a):
        fix = "give train and dev rows that do not overlap, e.g. [0, 1000] and [1000, null]"
        raise fail("dev.rows", f"dev rows {list(b)} overlap train rows {list(a)}", fix)


def _end(rows: Rows) -> float:
    return float("inf") if rows[1] is None else rows[1]


def sliced(task: str, split: str, rows: Rows | None, raw: RawSplit) -> tuple[RawSplit, int]:
    """The records `rows` keeps, counted in the file's order (its malformed records too, and
    only those within the range count as the slice's skipped), and the number of the first
    (1-based, for errors)."""
    if rows is None:
        return raw, 1
    start, stop = rows
    have = len(raw.rows) + raw.skipped
    if start >= have or (stop is not None and stop > have):
        raise TaskError(
            task,
            f"{split}.rows",
            f"{[start, stop]} asks for records past the {have} records of {raw.source}",
            f"use a range within [0, {have}] (stop null: to the end)",
        )
    kept, skips = [], []
    for row, line in itertools.islice(_in_file_order(raw), start, stop):
        if row is None:
            skips.append((len(kept), line))
        else:
            kept.append(row)
    bad_lines = [line for _, line in skips[:5]]
    part = dataclasses.replace(raw, rows=kept, skipped=len(skips), bad_lines=bad_lines, skips=skips)
    return part, start + 1


def _in_file_order(raw: RawSplit) -> Iterator[tuple[dict[str, Any] | None, int]]:
    """Every record of the file in order: (a row, 0) or (None, the line of a skipped one)."""
    done = 0
    for before, line in raw.skips:
        yield from ((row, 0) for row in raw.rows[done:before])
        done = before
        yield None, line
    yield from ((row, 0) for row in raw.rows[done:])
