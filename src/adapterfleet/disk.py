"""A full disk: recognised in whatever the libraries raise or log, and said in one line.

When the disk holding `storage` fills, every writer fails its own way: Python's `OSError`
(errno 28, ENOSPC), pyarrow's (Tune copying checkpoints and its experiment state), safetensors'
`I/O error: No space left on device (os error 28)`, SQLite's `database or disk is full` inside
SQLAlchemy's and MLflow's errors, and Ray's wrapping of any of them. None is worth a retry:
`is_disk_full` recognises them all, so the run stops with `DiskFullError`, one line naming the
folder and the fix, instead of retrying trials and MLflow calls until someone kills it.

`LibraryNotes` drops the log records in which MLflow and Ray Tune say it (a SQLAlchemy traceback
per failed write, a syncer warning every few seconds) and keeps the first for the driver to stop
on. `low_space` is the pre-flight check: a run does not start on a disk with less free than
`MIN_FREE_MB` (or `ADAPTERFLEET_MIN_FREE_MB`).
"""

from __future__ import annotations

import errno
import logging
import os
import re
import shutil
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from adapterfleet.errors import UserError

FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
# How the libraries say it in text (SQLite's SQLITE_FULL, C's and Rust's strerror, pyarrow's)
FULL_TEXT = re.compile(
    r"no space left on device|database or disk is full|disk quota exceeded|"
    r"\b(?:os error|errno) 28\b",
    re.IGNORECASE,
)
MIN_FREE_ENV = "ADAPTERFLEET_MIN_FREE_MB"
# The demo's tiny budget leaves about 70 MB in storage, and each run with other settings adds
# 60-110 MB (README, "What `storage` holds"): less free than this, and a run fills the disk.
MIN_FREE_MB = 200
# The loggers through which the libraries say that a write found the disk full
LIBRARY_LOGGERS = ("mlflow.store.db.utils", "ray.train._internal.syncer")
CAUSE_CHARS = 200
KEPT = "finished epochs, trials and registered versions are kept"


class DiskFullError(UserError, RuntimeError):
    """A write found the disk full; the message names the folder and the fix."""

    def __init__(self, folder: str | Path | None, cause: str) -> None:
        where = f"the disk holding {folder}" if folder else "a disk"
        super().__init__(
            f"{where} is full ({cause}): free space there, then run the same command again "
            f"to continue ({KEPT}); or start afresh on another disk (-o storage=DIR)"
        )
        self.folder = Path(folder) if folder else None


def says_full(text: str) -> bool:
    """Whether `text` (an error's message, a log line) says a disk is full."""
    return FULL_TEXT.search(text) is not None


def _chain(error: BaseException) -> Iterator[BaseException]:
    """`error` and what it wraps: its cause and context, Ray's `cause`, SQLAlchemy's `orig`."""
    todo, seen = [error], set()
    while todo:
        current = todo.pop(0)
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        linked = (
            getattr(current, "cause", None),
            getattr(current, "orig", None),
            current.__cause__,
            current.__context__,
        )
        todo += [link for link in linked if isinstance(link, BaseException)]


def full_cause(error: BaseException | None) -> BaseException | None:
    """The error in `error`'s chain that says a disk is full (None when none does): an
    `OSError` with ENOSPC or EDQUOT first, else the innermost whose own text says so (an outer
    Ray error repeats the whole traceback)."""
    if error is None:
        return None
    found = None
    for link in _chain(error):
        if isinstance(link, OSError) and link.errno in FULL_ERRNOS:
            return link
        if says_full(str(link)):
            found = link
    return found


def is_disk_full(error: BaseException | None) -> bool:
    return full_cause(error) is not None


def cause_line(error: BaseException) -> str:
    """What was full, in a few words: `OSError 28 No space left on device: <file>`, SQLite's
    `database or disk is full`, else the error's first line."""
    cause = full_cause(error) or error
    if isinstance(cause, OSError) and cause.errno in FULL_ERRNOS:
        text = f"OSError {cause.errno} {os.strerror(cause.errno)}"
        return text + (f" writing {cause.filename}" if cause.filename else "")
    first = " ".join(str(cause).split()) or type(cause).__name__
    if "database or disk is full" in first.lower():
        return "SQLite: database or disk is full, writing the tracking store"
    first = f"{type(cause).__name__}: {first}"
    return first if len(first) <= CAUSE_CHARS else first[: CAUSE_CHARS - 1] + "…"


def disk_full(folder: str | Path | None, error: BaseException) -> DiskFullError:
    """The one-line error for `error` (which `is_disk_full`), naming `folder`."""
    if isinstance(error, DiskFullError):
        return error
    return DiskFullError(folder, cause_line(error))


class LibraryNotes(logging.Filter):
    """On the loggers of `LIBRARY_LOGGERS`: drops each record that says a disk is full (the
    run's one line says it) and keeps the first's cause in `first` for the driver to stop on."""

    def __init__(self) -> None:
        super().__init__()
        self.first: str | None = None
        self._lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        try:
            text = record.getMessage()
        except Exception:  # noqa: BLE001 - a record whose arguments do not format
            text = str(record.msg)
        if not is_disk_full(error) and not says_full(text):
            return True
        with self._lock:
            if self.first is None:
                self.first = cause_line(error) if error is not None else _line_of(text)
        return False

    def take(self) -> str | None:
        """The first cause noted since the last `take`, and forget it."""
        with self._lock:
            first, self.first = self.first, None
        return first


def _line_of(text: str) -> str:
    """The line of a logged traceback that says the disk is full."""
    lines = [" ".join(line.split()) for line in text.splitlines()]
    said = [line for line in lines if says_full(line)]
    line = said[-1] if said else lines[0]
    return line if len(line) <= CAUSE_CHARS else line[: CAUSE_CHARS - 1] + "…"


NOTES = LibraryNotes()


def watch_library_logs() -> LibraryNotes:
    """Put `NOTES` on the libraries' loggers (once per process); returns it."""
    for name in LIBRARY_LOGGERS:
        logger = logging.getLogger(name)
        if NOTES not in logger.filters:
            logger.addFilter(NOTES)
    return NOTES


def min_free_mb() -> float:
    """The free space a run needs on its storage disk: `ADAPTERFLEET_MIN_FREE_MB`, else 200."""
    text = os.environ.get(MIN_FREE_ENV, "").strip()
    if not text:
        return MIN_FREE_MB
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value < float("inf"):
        raise UserError(
            f"{MIN_FREE_ENV}={text!r}: expected the megabytes a run needs free on its storage "
            f"disk, a number of 0 or more (0 turns the check off; unset it for {MIN_FREE_MB})"
        )
    return value


def free_mb(folder: Path) -> float | None:
    """Free megabytes on the disk that holds (or will hold) `folder`; None if unknown."""
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    try:
        return shutil.disk_usage(existing).free / 1e6
    except OSError:
        return None


def low_space(folder: Path) -> str | None:
    """Why a run should not start with `folder` as its storage (None when it may): the disk
    that holds it has less free than `min_free_mb()`."""
    floor = min_free_mb()
    free = free_mb(folder) if floor > 0 else None
    if free is None or free >= floor:
        return None
    return (
        f"the disk holding {folder} has {free:.0f} MB free, less than the {floor:g} MB a run "
        "needs (checkpoints, the tracking store, the token cache); free space there or point "
        f"storage at another disk (-o storage=DIR); {MIN_FREE_ENV}=N lowers the floor"
    )


@contextmanager
def stops_when_full(folder: str | Path | None) -> Iterator[None]:
    """Any error of the block that says a disk is full is raised as `DiskFullError` naming
    `folder` (the config's storage); others as they are."""
    try:
        yield
    except Exception as error:
        if is_disk_full(error):
            raise disk_full(folder, error) from None
        raise
