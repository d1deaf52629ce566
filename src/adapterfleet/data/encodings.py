"""The text encoding of a data file: the `encoding:` of a split, checked when the task is
configured, and the codec it is read with."""

from __future__ import annotations

import codecs
from collections.abc import Callable

from adapterfleet.data.errors import TaskError

DEFAULT_ENCODING = "utf-8-sig"


def parse_encoding(fail: Callable[..., TaskError], key: str, value: str | None) -> str:
    """A split's `encoding:` (default UTF-8): a codec Python knows that decodes bytes to text
    (not rot13, base64 or hex, which `codecs` also knows)."""
    encoding = value or DEFAULT_ENCODING
    try:
        text_encoding = codecs.lookup(encoding)._is_text_encoding
    except LookupError:
        raise fail(f"{key}.encoding", f"unknown encoding {encoding!r}") from None
    if not text_encoding:
        fix = "e.g. utf-8, latin-1, cp1252"
        raise fail(f"{key}.encoding", f"{encoding!r} is not a text encoding", fix)
    return encoding


def reading_codec(encoding: str) -> str:
    """`encoding`, but UTF-8 read as `utf-8-sig`: a byte-order mark is never part of the first
    column's name (or the first JSON line)."""
    return "utf-8-sig" if codecs.lookup(encoding).name == "utf-8" else encoding
