"""How long-running work talks to the person who started it: one line at a time, at a level."""

from __future__ import annotations

from collections.abc import Callable
from enum import IntEnum

Say = Callable[[str], None]  # prints (or logs) one line of progress


class Level(IntEnum):
    """How much a command prints (`--quiet`, the default, `--verbose`)."""

    QUIET = 0  # errors and the final summary only
    DEFAULT = 1  # our own progress lines; the libraries' INFO lines, banners and colours silenced
    VERBOSE = 2  # also what Ray, Tune and MLflow print themselves


def silent(line: str) -> None:
    """A `Say` that says nothing (`--quiet`)."""


def duration_text(seconds: float) -> str:
    """`45 s`, `1 min 52 s`, `2 h 5 min`."""
    whole = round(seconds)
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        return f"{whole // 60} min {whole % 60} s"
    return f"{whole // 3600} h {whole % 3600 // 60} min"
