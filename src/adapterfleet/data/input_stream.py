"""`predict --input -` (or a pipe, `/dev/stdin`): standard input, read whole into a file of a
temporary folder first, since the readers read files (Parquet's seeking them)."""

from __future__ import annotations

import contextlib
import shutil
import stat
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from adapterfleet.data.compressed import refuse_compressed
from adapterfleet.data.errors import TaskError
from adapterfleet.data.sources import FORMATS

FORMAT_FIX = f"pass --format with one of {', '.join(FORMATS)}"
STDIN_FIX = "pipe the rows in (`... | adapterfleet predict ... --input -`) or give --input FILE"


def is_stream(path: Path) -> bool:
    """`-`, or a pipe or terminal (`/dev/stdin`, a shell's `<(...)`): read once, not a file."""
    if str(path) == "-":
        return True
    try:
        mode = path.stat().st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISCHR(mode)


@contextlib.contextmanager
def spooled(task: str, path: Path, fmt: str | None) -> Iterator[Path]:
    """The stream's bytes in a file named `stdin.<fmt>` of a temporary folder (the readers
    read a file, Parquet's seeking it), gone after the block."""
    if fmt is None:
        where = "standard input" if str(path) == "-" else str(path)
        raise TaskError(task, "--input", f"{where} has no suffix to tell its format", FORMAT_FIX)
    with tempfile.TemporaryDirectory(prefix="adapterfleet-stdin-") as folder:
        copy = Path(folder) / f"stdin.{fmt}"
        with copy.open("wb") as out:
            if str(path) == "-":
                if sys.stdin is None:  # closed (`<&-`): nothing to read, as from /dev/null
                    raise TaskError(task, "--input", "standard input is closed", STDIN_FIX)
                shutil.copyfileobj(sys.stdin.buffer, out)
            else:
                with path.open("rb") as stream:
                    shutil.copyfileobj(stream, out)
        where = "standard input" if str(path) == "-" else str(path)
        refuse_compressed(task, "input", copy, "", shown=where)
        try:
            yield copy
        except TaskError as error:  # named as the user gave it, not as the spooled copy
            if str(copy) not in error.problem:
                raise
            field = "--input" if error.field.startswith("input") else error.field
            problem = error.problem.replace(str(copy), where)
            raise TaskError(error.task, field, problem, error.fix) from None
