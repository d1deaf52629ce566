"""A data file that is compressed (gzip, zip, bzip2, xz, zstd), told by its first bytes: the
readers read plain files, and a `.csv.gz` read as text said `is not UTF-8: byte 0x8b ...; set
train.encoding`, then, with `encoding: latin-1`, that its columns were mojibake. Said as what
it is, with the command that decompresses it."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path

from adapterfleet.data.errors import TaskError


@dataclass(frozen=True)
class _Kind:
    name: str
    magics: tuple[bytes, ...]
    suffix: str  # what its tool strips, keeping the file (`keep`); other names go to stdout
    keep: str
    to_stdout: str


_KINDS = (
    _Kind("gzip", (b"\x1f\x8b",), ".gz", "gunzip -k", "gunzip -c"),
    _Kind("zip", (b"PK\x03\x04", b"PK\x05\x06"), ".zip", "unzip", "unzip -p"),
    _Kind("xz", (b"\xfd7zXZ\x00",), ".xz", "unxz -k", "xz -dc"),
    _Kind("zstd", (b"\x28\xb5\x2f\xfd",), ".zst", "unzstd", "zstd -dc"),
    _Kind("bzip2", (b"BZh",), ".bz2", "bunzip2 -k", "bunzip2 -c"),
)
# "BZh" may begin a text file: bzip2's header goes on with a block size and a block's magic
_BZIP2_BLOCKS = (b"1AY&SY", b"\x17\x72\x45\x38\x50\x90")  # a first block, or the stream's end


def refuse_compressed(task: str, field: str, path: Path, use: str, shown: str = "") -> None:
    """A `TaskError` when `path` is compressed: `<path> is gzip-compressed; decompress it
    (gunzip -k <path>) and <use>`. `shown` names a copy's origin (standard input)."""
    kind = _compression(path)
    if kind is None:
        return
    if shown:  # standard input: decompressed on the way in
        command = f"{kind.to_stdout} FILE | adapterfleet predict ... --input -"
    elif path.name.lower().endswith(kind.suffix) and len(path.name) > len(kind.suffix):
        command = f"{kind.keep} {shlex.quote(str(path))}"
    else:
        plain = path.with_name(f"{path.stem}-decompressed{path.suffix}")
        command = f"{kind.to_stdout} {shlex.quote(str(path))} > {shlex.quote(str(plain))}"
    problem = f"{shown or path} is {kind.name}-compressed"
    raise TaskError(task, field, problem, f"decompress it ({command})" + (use and f" and {use}"))


def decompress_fix(path: Path) -> str | None:
    """By its name alone (a config read before any file): the fix for a compressed suffix."""
    kind = next((k for k in _KINDS if path.suffix.lower() == k.suffix), None)
    if kind is None:
        return None
    return (
        f"decompress it ({kind.keep} {shlex.quote(str(path))}) and point the config at the result"
    )


def _compression(path: Path) -> _Kind | None:
    """The compression `path` starts with; None for any other file and one that cannot be
    read (its reader says why)."""
    try:
        with path.open("rb") as handle:
            head = handle.read(10)
    except OSError:
        return None
    for kind in _KINDS:
        if head.startswith(kind.magics):
            if kind.name == "bzip2" and not (head[3:4].isdigit() and head[4:] in _BZIP2_BLOCKS):
                continue
            return kind
    return None
