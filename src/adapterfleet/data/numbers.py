"""Numbers as task declarations and data files hand them over: a YAML, JSON or CSV value may
be a number or text that holds one (PyYAML reads `1e-1` as text; a CSV cell is always text)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from adapterfleet.data.errors import TaskError


def as_number(value: Any) -> float | None:
    """`value` as a finite float (a number, or text holding one), else None. Text with an
    underscore is none (`float` reads Python's digit grouping `0_5` as 5.0), nor is an integer
    past float's range (`OverflowError`: a JSON `1` and 400 zeros)."""
    if isinstance(value, bool) or (isinstance(value, str) and "_" in value):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return number if math.isfinite(number) else None


def parse_fraction(
    fail: Callable[[str, str, str], TaskError], key: str, value: Any, *, ends: bool, example: float
) -> float:
    """A task's fraction `key`: in [0, 1] when `ends` (0 and 1 allowed), else in (0, 1)."""
    number = as_number(value)
    inside = number is not None and (0.0 <= number <= 1.0 if ends else 0.0 < number < 1.0)
    if number is None or not inside:
        interval = "[0, 1]" if ends else "(0, 1)"
        raise fail(key, f"{value!r} is not a fraction in {interval}", f"e.g. {example}")
    return number
