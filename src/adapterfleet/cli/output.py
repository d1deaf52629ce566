"""How the CLI shows things: tables, and errors as one clear line instead of a traceback."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import typer

F = TypeVar("F", bound=Callable[..., Any])


def _expected_errors() -> tuple[type[BaseException], ...]:
    from adapterfleet.adapters import BaseModelError, UnsupportedModelError, WeightsFileError
    from adapterfleet.config import ConfigError
    from adapterfleet.data import TaskError

    errors: list[type[BaseException]] = [
        ConfigError,
        TaskError,
        WeightsFileError,
        BaseModelError,
        UnsupportedModelError,
        FileNotFoundError,
    ]
    from adapterfleet.orchestration.jobs import JobError
    from adapterfleet.registry import RegistryError

    errors += [RegistryError, JobError]
    return tuple(errors)


def fail_cleanly(command: F) -> F:
    """Print expected errors (bad config, data, files, registry) as `error: ...` and exit 2."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except _expected_errors() as error:
            typer.secho(f"error: {error}", err=True, fg=typer.colors.RED)
            raise typer.Exit(2) from None

    return wrapper  # type: ignore[return-value]


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4f}" if abs(value) < 10 else f"{value:.1f}"
    return str(value)


def metrics_table(rows: Sequence[dict[str, Any]]) -> None:
    """A plain Markdown table of `rows` (columns in first-seen order)."""
    if not rows:
        typer.echo("(nothing to show)")
        return
    columns = list(dict.fromkeys(key for row in rows for key in row))
    cells = [[_cell(row.get(c, "")) for c in columns] for row in rows]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(columns)]
    typer.echo("| " + " | ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)) + " |")
    typer.echo("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for row in cells:
        typer.echo("| " + " | ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)) + " |")
