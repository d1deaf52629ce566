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


class StageCounts:
    """What a footer shows of the pipeline: `trials 2 done, 0 running, 0 pending; fusions 1
    training`. Taken whole from the latest line that ends with it (a trial's epoch,
    tuning/progress.py), and moved on by the lines that carry none: a trial's end (`trial t1:
    dev accuracy 0.8000 (epoch 2) [1/1]`, tuning/registration.py), a fusion's start and epochs
    (`fusion x: training over ...`, `fusion x (fusion-1) epoch 3/10: ...`, orchestration/
    fusion_job.py and fusion_training.py) and its end (`fusion x: registered ...`, `kept ...`
    or `failed: ...`, orchestration/pipeline.py). tests/test_console.py makes these lines with
    the functions that print them."""

    SUFFIX = re.compile(r"\[(trials [^\]]*)\]\s*$")
    TRIALS = re.compile(r"trials (\d+) done, (\d+) running, (\d+) pending(?:; (.*))?$")
    FUSIONS = re.compile(r"fusions ((?:\d+ \w+)(?:, \d+ \w+)*)$")
    TRIAL_ENDED = re.compile(r"trial (\S+): .* \[\d+/\d+\]$")
    FUSION_TRAINS = re.compile(
        r"fusion (\S+)(?: \([^)]*\))?(?: epoch \d|: training over |: resuming after epoch "
        r"|: adapters .* ready, starting$)"
    )
    FUSION_ENDED = re.compile(r"fusion (\S+): (registered |kept |failed: )")
    FUSION_STATES = ("waiting", "training", "done", "failed")  # the order a fusion goes

    def __init__(self) -> None:
        self.trials: tuple[int, int, int] | None = None  # done, running, pending
        self.fusions: dict[str, int] = {}  # how many fusions are in each state
        self.note = ""  # the rest of the counts, when it is not the fusions' (shown as it is)
        self._ended: set[str] = set()  # trials
        self._fusion_at: dict[str, str] = {}  # each fusion's state, as its own lines said

    def see(self, line: str) -> None:
        """Take what `line` tells of the trials and fusions, if anything."""
        if found := self.SUFFIX.search(line):
            self._take(found.group(1))
        elif found := self.TRIAL_ENDED.match(line):
            self._trial_ended(found.group(1))
        elif found := self.FUSION_TRAINS.match(line):
            self._fusion_moved(found.group(1), "training")
        elif found := self.FUSION_ENDED.match(line):
            self._fusion_moved(found.group(1), "failed" if found.group(2) == "failed: " else "done")

    def __str__(self) -> str:
        parts = []
        if self.trials is not None:
            parts.append("trials {} done, {} running, {} pending".format(*self.trials))
        shown = [f"{self.fusions[s]} {s}" for s in self.FUSION_STATES if self.fusions.get(s)]
        parts += [f"fusions {', '.join(shown)}"] if shown else []
        parts += [self.note] if self.note else []
        return "; ".join(parts) or "starting"

    def _take(self, counts: str) -> None:
        found = self.TRIALS.match(counts)
        if found is None:  # counts of another shape: shown as they are, not moved on
            self.trials, self.fusions, self.note = None, {}, counts
            return
        self.trials = (int(found.group(1)), int(found.group(2)), int(found.group(3)))
        rest = found.group(4) or ""
        fusions = self.FUSIONS.match(rest)
        pairs = [p.split(" ") for p in fusions.group(1).split(", ")] if fusions else []
        self.fusions = {state: int(n) for n, state in pairs}
        self.note = "" if fusions else rest

    def _trial_ended(self, trial: str) -> None:
        if self.trials is None or trial in self._ended:
            return
        self._ended.add(trial)
        done, running, pending = self.trials
        if running or pending:  # one that failed before it started was pending
            self.trials = (
                (done + 1, running - 1, pending) if running else (done + 1, 0, pending - 1)
            )

    def _fusion_moved(self, fusion: str, state: str) -> None:
        order = self.FUSION_STATES
        known = self._fusion_at.get(fusion)
        if known is not None and order.index(known) >= order.index(state):
            return
        others = sum(s == state for s in self._fusion_at.values())  # said to be there
        self._fusion_at[fusion] = state
        if self.trials is None and not self.note:  # no counts yet: the fusions' lines alone
            states = list(self._fusion_at.values())
            self.fusions = {s: states.count(s) for s in order if s in states}
            return
        earlier = [s for s in order[: order.index(state)] if self.fusions.get(s)]
        before = known or next(iter(earlier), None)
        if before in earlier and self.fusions.get(state, 0) <= others:  # else counted there
            self.fusions[before] -= 1
            self.fusions[state] = self.fusions.get(state, 0) + 1


class LiveFooter:
    """A `Say` for a terminal: each line printed above a footer that stays on the last row and is
    redrawn every second: the elapsed time and where the trials and fusions are (`StageCounts`,
    from the lines it prints). Lines from several threads are printed whole."""

    def __init__(self, title: str, stream: TextIO, refresh_s: float = 1.0) -> None:
        self.title, self.stream, self.refresh_s = title, stream, refresh_s
        self.counts = StageCounts()
        self._started = time.monotonic()
        self._lock = threading.Lock()
        self._stop = threading.Event()

    def __call__(self, line: str) -> None:
        with self._lock:
            self.counts.see(line)
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
