"""A data file that holds no record though it has bytes: blank lines, a byte-order mark, or
both. Said as the 0-byte file is (`is empty (...)`), not as a column missing from a file that
has no columns at all."""

from __future__ import annotations

import codecs
from pathlib import Path

_PEEK = 1 << 16  # a longer file holds more than blank lines, or is read and refused as others
_MARKS = (codecs.BOM_UTF8, codecs.BOM_UTF32_LE, codecs.BOM_UTF32_BE, codecs.BOM_UTF16_LE,
          codecs.BOM_UTF16_BE)  # fmt: skip


def blank_file(path: Path, codec: str) -> str | None:
    """What `path` holds when it is nothing but a byte-order mark and blank lines (spaces, tabs,
    line breaks), in words (`only blank lines`); None for any other file, and for one that
    cannot be read or decoded with `codec` (its reader says why)."""
    try:
        with path.open("rb") as handle:
            data = handle.read(_PEEK + 1)
        text = data.decode(codec)
    except (OSError, UnicodeError, LookupError):
        return None
    if not data or len(data) > _PEEK or text.lstrip("\ufeff").strip():
        return None
    marked = data.startswith(_MARKS)
    if not marked:
        return "only blank lines"
    return "only a byte-order mark" + (" and blank lines" if text.strip("\ufeff") else "")
