"""`UserError`: the one base of every error a person can fix from its message alone.

A bad config value, a missing file, a store that does not answer, a refused login: each layer
raises its own subclass (`ConfigError`, `TaskError`, `WeightsFileError`, `RegistryError`, ...)
with one line that names the field or the thing and the fix. The CLI catches `UserError` once,
prints `error: <line>` and exits 2; anything else is a bug and keeps its traceback.

`user_path` resolves a path a person gave, so that a symlink loop or an unreadable folder is
such an error too (Python 3.11's `Path.resolve` raises RuntimeError on a loop). `nul_at` finds a
NUL character in a YAML document, which no file system, URI or shell takes. `unknown_keys` is
how every refusal of a key that is not one of a mapping's says so, the same way everywhere.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any


class UserError(Exception):
    """A mistake in what was given (or a condition outside, such as a server that is down)
    that the message explains in one line, with the fix. The CLI exits with `exit_code`."""

    exit_code = 2  # refused: the command, config, data or files need a fix


class JobFailed(UserError):
    """The job ran and failed (trials failed, training diverged, a wait timed out): exit 1, as
    a script tells it from a command refused (2); what finished is kept."""

    exit_code = 1


class PathError(UserError, ValueError):
    """A path that was given cannot be resolved (a symlink loop, a folder that cannot be read)."""


def cause_text(error: BaseException, limit: int = 300) -> str:
    """An error raised in a Ray task or Tune trial as one line: its cause (a `UserError` as its
    own message; another as `ValueError: ...`, cut at `limit`), not the traceback text Ray and
    Tune wrap it in, which cut short hides the cause."""
    cause = getattr(error, "cause", None)  # ray.exceptions.RayTaskError
    cause = cause if isinstance(cause, BaseException) else error
    text = " ".join(str(cause).split())
    if type(cause).__name__ in _WORKER_DEATHS and not getattr(cause, "actor_init_failed", False):
        return _worker_death(text)
    if isinstance(cause, UserError):
        return text
    if cause is not error or not text:
        text = f"{type(cause).__name__}: {text}".rstrip(": ")
    return text if len(text) <= limit else text[: limit - 1] + "…"


# Ray's errors for a worker process (or its node) that went away: their text is a page on
# OOM killers and resource isolation, which cut short says neither which process nor where.
_WORKER_DEATHS = {
    "ActorDiedError",
    "ActorUnavailableError",
    "LocalRayletDiedError",
    "NodeDiedError",
    "WorkerCrashedError",
}


def _worker_death(text: str) -> str:
    pid, ip = (re.search(rf"\b{name}: (\S+)", text) for name in ("pid", "ip"))
    who = (f" pid {pid[1]}" if pid else "") + (f" on {ip[1]}" if ip else "")
    return (
        f"its Ray worker{who} died: killed, out of memory or its node left; `ray logs` says which"
    )


def user_path(value: str | Path, where: str) -> Path:
    """`value` made absolute (`~` expanded, links followed); `where` names it in the error."""
    if "\x00" in str(value):
        raise PathError(f"{where}: {str(value)!r} holds a NUL character (\\0); remove it")
    path = Path(value).expanduser()
    try:
        return path.resolve()
    except RuntimeError as error:  # "Symlink loop from ..." (Python 3.11, 3.12)
        raise PathError(f"{where}: {path} is a symlink loop ({error}); fix the link") from None
    except OSError as error:  # a loop (Python 3.13+) or a folder on the way that cannot be read
        reason = error.strerror or type(error).__name__
        raise PathError(f"{where}: cannot resolve {path} ({reason}); fix the path") from None


def nul_at(value: Any, where: str = "") -> tuple[str, str] | None:
    """(the dotted place, the text) of the first key or text in `value` (a YAML document:
    mappings, lists, scalars) that holds a NUL character; None when none does."""
    if isinstance(value, str):
        return (where, value) if "\x00" in value else None
    items: list[tuple[Any, str]] = []
    if isinstance(value, Mapping):
        for key, item in value.items():
            items += [(key, where), (item, f"{where}.{key}" if where else str(key))]
    elif isinstance(value, list):
        items = [(item, f"{where}[{index}]") for index, item in enumerate(value)]
    return next((found for item, place in items if (found := nul_at(item, place))), None)


def unknown_keys(unknown: Iterable[Any], allowed: Sequence[Any]) -> str:
    """How an unknown key is said everywhere (config, tasks, files): `unknown key(s)
    ['trainin'] (did you mean 'training'?); allowed: a, b, c`, the close match found by
    difflib (none when nothing is close)."""
    unknown = list(unknown)
    return f"unknown key(s) {unknown}{did_you_mean(unknown, allowed)}; {allowed_keys(allowed)}"


def did_you_mean(unknown: Sequence[Any], allowed: Sequence[Any]) -> str:
    """` (did you mean 'training'?)` for the unknown keys that are close to an allowed one;
    with several, each named: ` (did you mean 'training' for 'trainin', 'seeds' for 'sed'?)`."""
    names = [str(key) for key in allowed]
    close = {
        str(key): match[0]
        for key in unknown
        if (match := difflib.get_close_matches(str(key), names, n=1, cutoff=0.6))
    }
    if not close:
        return ""
    if len(unknown) == 1:
        return f" (did you mean {next(iter(close.values()))!r}?)"
    return f" (did you mean {', '.join(f'{m!r} for {k!r}' for k, m in close.items())}?)"


def allowed_keys(allowed: Sequence[Any]) -> str:
    """`allowed: a, b, c`: the keys a mapping takes, in their own order."""
    return f"allowed: {', '.join(str(key) for key in allowed)}"
