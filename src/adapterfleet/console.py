"""How long-running work talks to the person who started it: one line at a time, at a level."""

from __future__ import annotations

import re
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from enum import IntEnum
from typing import TextIO

Say = Callable[[str], None]  # prints (or logs) one line of progress

RELAY_MARK = "[adapterfleet] "  # a line for the driver's relay: RELAY_MARK + job + RELAY_SEP + text
RELAY_SEP = " | "


@dataclass(frozen=True)
class MarkedSay:
    """The `Say` of work in a Ray worker (a trial, a fusion, a baseline): each line to the
    worker's stdout, marked with `job`, which the driver's relay (`orchestration/relay.py`)
    prints plain among its own lines. Written to the stream, not through `print`: Ray Train's
    workers patch `print` to log each line and also echo it, which the driver would show twice."""

    job: str

    def __call__(self, line: str) -> None:
        sys.stdout.write(f"{RELAY_MARK}{self.job}{RELAY_SEP}{line}\n")
        sys.stdout.flush()


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


def plural(count: int, noun: str, *, bare: bool = False) -> str:
    """`1 row`, `2 rows`; with `bare`, the noun alone (`row`, `rows`)."""
    word = noun if count == 1 else f"{noun}s"
    return word if bare else f"{count} {word}"


class RowCount:
    """Called with the rows done so far, it says `predict x: 6,000 of 20,000 rows, 48 s` once
    every `period_s` (a log file's progress, where a terminal gets a bar); the last row is left
    to the caller's own closing line."""

    def __init__(self, title: str, total: int, say: Say, period_s: float = 30.0) -> None:
        self.title, self.total, self.say, self.period_s = title, total, say, period_s
        self.started = self.said = time.monotonic()

    def __call__(self, done: int) -> None:
        now = time.monotonic()
        if done >= self.total or now - self.said < self.period_s:
            return
        self.said = now
        spent = duration_text(now - self.started)
        rows = plural(self.total, "row", bare=True)
        self.say(f"{self.title}: {done:,} of {self.total:,} {rows}, {spent}")


class LiveFooter:
    """A `Say` for a terminal: each line printed above a footer that stays on the last row and is
    redrawn every second: the elapsed time and the latest trial counts (`[trials 2 done, ...]`,
    as the sweep's epoch lines end). Lines from several threads are printed whole."""

    COUNTS = re.compile(r"\[(trials [^\]]*)\]\s*$")

    def __init__(self, title: str, stream: TextIO, refresh_s: float = 1.0) -> None:
        self.title, self.stream, self.refresh_s = title, stream, refresh_s
        self.counts = "starting"
        self._started = time.monotonic()
        self._lock = threading.Lock()
        self._stop = threading.Event()

    def __call__(self, line: str) -> None:
        with self._lock:
            found = self.COUNTS.search(line)
            if found:
                self.counts = found.group(1)
            self.stream.write(f"\r\x1b[2K{line}\n")
            self._draw()

    def footer(self) -> str:
        elapsed = duration_text(time.monotonic() - self._started)
        return f"{self.title} · {elapsed} · {self.counts}"

    def _draw(self) -> None:
        self.stream.write(f"\r\x1b[2K\x1b[7m {self.footer()} \x1b[0m")
        self.stream.flush()

    @contextmanager
    def shown(self) -> Iterator[LiveFooter]:
        """Draw the footer, redraw it every `refresh_s` while the block runs, then clear it."""
        thread = threading.Thread(target=self._refresh, name="live-footer", daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self._stop.set()
            thread.join()
            with self._lock:
                self.stream.write("\r\x1b[2K")
                self.stream.flush()

    def _refresh(self) -> None:
        while not self._stop.is_set():
            with self._lock:
                self._draw()
            self._stop.wait(self.refresh_s)


@contextmanager
def progress_say(
    level: Level, echo: Say, title: str, stream: TextIO | None = None
) -> Iterator[Say]:
    """The `Say` of a long command: nothing at `--quiet`; on a terminal at the default level, a
    live footer under the lines; else `echo`, plain lines (a log file gets no escape codes)."""
    stream = stream or sys.stdout
    if level == Level.QUIET:
        yield silent
    elif level == Level.DEFAULT and stream.isatty():
        with LiveFooter(title, stream).shown() as live:
            yield live
    else:
        yield echo
