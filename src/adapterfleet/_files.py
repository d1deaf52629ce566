"""Files and folders made through `tempfile` (mode 0600 / 0700, then renamed into place) get
the mode the user's umask gives any other file: weights, run folders and pulls on shared
storage stay readable by the group or the other accounts the umask allows."""

from __future__ import annotations

import functools
import os
import re
from pathlib import Path


@functools.cache
def _umask() -> int:
    """The process umask, read without changing it where Linux shows it (`os.umask` sets it
    for a moment, in which another thread's new file would get the wrong mode)."""
    try:
        found = re.search(r"^Umask:\s*([0-7]+)$", Path("/proc/self/status").read_text(), re.M)
    except OSError:
        found = None
    if found:
        return int(found.group(1), 8)
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def follow_umask(path: str | os.PathLike[str]) -> None:
    """Give `path` (a file, or a folder) the mode a plain `open` or `mkdir` would have."""
    full = 0o777 if os.path.isdir(path) else 0o666
    os.chmod(path, full & ~_umask())
