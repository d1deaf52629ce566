"""An exclusive lock on a file, across processes on one machine or a shared POSIX filesystem."""

from __future__ import annotations

import fcntl
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def exclusive_lock(path: Path, on_wait: Callable[[], None] | None = None) -> Iterator[None]:
    """Hold an exclusive `flock` on `path` (created, with its folder, when missing) for the
    block; `on_wait()` is called once when another process holds it, before waiting."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if on_wait is not None:
                on_wait()
            fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


@contextmanager
def lock_if_free(path: Path) -> Iterator[bool]:
    """Hold an exclusive `flock` on an existing `path` for the block, when no other process
    holds it: yields whether it was taken (False: another holds it, or there is no such file)."""
    if not path.is_file():
        yield False
        return
    with open(path, "r+") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
