"""An exclusive lock on a file, across processes on one machine or a shared POSIX filesystem."""

from __future__ import annotations

import contextlib
import fcntl
import os
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


class LockHeld(Exception):
    """`sole_lock`'s path is held by another process; `note` is what that one wrote in it."""

    def __init__(self, note: str) -> None:
        super().__init__(note)
        self.note = note


@contextmanager
def sole_lock(path: Path, note: str) -> Iterator[None]:
    """Hold an exclusive `flock` on `path` for the block, `note` (who holds it) written in it, or
    raise LockHeld at once where another process holds it. The kernel lets go of a lock when its
    process ends in any way, so a killed holder leaves none that refuses; the file goes when the
    block ends (unlinked while held: a process that opened it meanwhile sees another file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    while True:
        lock = open(path, "a+")  # noqa: SIM115 - held open for the block
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.seek(0)
            held = LockHeld(lock.read().strip())
            lock.close()
            raise held from None
        if _is_at(lock.fileno(), path):
            break
        lock.close()  # its holder removed it after this opened it: lock the file there now
    try:
        lock.truncate(0)
        lock.write(note + "\n")
        lock.flush()
        yield
    finally:
        with contextlib.suppress(OSError):
            path.unlink()
        lock.close()


def _is_at(fd: int, path: Path) -> bool:
    try:
        return os.stat(path).st_ino == os.fstat(fd).st_ino
    except FileNotFoundError:
        return False
