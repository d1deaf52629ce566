"""A disk that really fills: a tmpfs of a few megabytes mounted on a test's folder (root only;
the tests that need one skip, saying why, where mounting is not permitted), and a filler."""

from __future__ import annotations

import contextlib
import errno
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest


@contextlib.contextmanager
def small_disk(folder: Path, megabytes: int) -> Iterator[Path]:
    """`folder` on a tmpfs of its own of `megabytes`, unmounted afterwards."""
    folder.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={megabytes}m", "tmpfs", str(folder)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if mounted.returncode != 0:
        why = (mounted.stderr or mounted.stdout).strip() or f"exit {mounted.returncode}"
        pytest.skip(f"cannot mount a tmpfs to fill ({why}): the test needs root (CAP_SYS_ADMIN)")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def fill(folder: Path) -> Path:
    """Write a file in `folder` until its disk has not a byte left; returns the file."""
    filler = folder / "filler"
    with open(filler, "wb", buffering=0) as out:
        for size in (2**20, 512, 1):
            with contextlib.suppress(OSError):
                while True:
                    out.write(b"\0" * size)
    with pytest.raises(OSError) as full:  # nothing more fits
        (folder / "probe").write_bytes(b"\0" * 4096)
    assert full.value.errno == errno.ENOSPC
    return filler
