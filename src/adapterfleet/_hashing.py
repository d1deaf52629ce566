"""The sha256 of a file, read in chunks: registered weights are checked against it."""

from __future__ import annotations

import hashlib
import os


def sha256_file(path: str | os.PathLike[str], chunk_size: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(chunk_size):
            digest.update(chunk)
    return digest.hexdigest()
