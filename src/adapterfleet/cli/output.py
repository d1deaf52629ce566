"""How the CLI shows things: tables, and errors as one clear line instead of a traceback."""

from __future__ import annotations

import functools
import logging
import signal
import sys
import threading
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any, TypeVar

import typer

from adapterfleet.console import Say, plural
from adapterfleet.disk import DiskFullError, disk_full, is_disk_full
from adapterfleet.errors import UserError
from adapterfleet.masking import mask

if TYPE_CHECKING:
    from adapterfleet.config import PipelineConfig
    from adapterfleet.results.report import ReportResult
    from adapterfleet.training import TrainConfig
    from adapterfleet.training.modes import RunResult

F = TypeVar("F", bound=Callable[..., Any])


def fail_cleanly(command: F) -> F:
    """Print a `UserError` (bad config, data, files, a store that does not answer, ...) as one
    line `error: ...`, secrets masked, and exit 2; so is a full disk, whatever raised it;
    Ctrl-C as `interrupted`, exit 130. Anything else is a bug: its traceback stays.

    `wrap_commands` applies it to every command of the app, so no command can miss it."""
    if getattr(command, "_fails_cleanly", False):
        return command

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except UserError as error:
            typer.secho(f"error: {error_line(error)}", err=True, fg=typer.colors.RED)
            raise typer.Exit(error.exit_code) from None
        except KeyboardInterrupt:
            typer.secho("interrupted", err=True, fg=typer.colors.YELLOW)
            raise typer.Exit(130) from None
        except BrokenPipeError:
            if not _stdout_gone():
                raise
            raise typer.Exit(READER_GONE) from None  # `predict --out - | head -1`: said nothing
        except Exception as error:
            if not is_disk_full(error):  # a bug: its traceback stays
                raise
            line = error_line(disk_full(None, error))  # a command that names no storage
            typer.secho(f"error: {line}", err=True, fg=typer.colors.RED)
            raise typer.Exit(2) from None

    wrapper._fails_cleanly = True  # type: ignore[attr-defined]
    return wrapper  # type: ignore[return-value]


# The status of a command whose standard output's reader went away (`| head -1`), as a Unix tool
# killed by SIGPIPE ends (128 + 13): quietly, what it wrote before taken.
READER_GONE = 141


def _stdout_gone() -> bool:
    """Whether standard output is a pipe whose reader has gone (poll says POLLERR): then a
    BrokenPipeError is the reader's end, not a bug. Its unwritten lines are dropped, so the
    exit's flush raises nothing more."""
    import os
    import select

    try:
        fd = sys.stdout.fileno()
        poller = select.poll()
        poller.register(fd, select.POLLOUT)
        gone = any(event & select.POLLERR for _, event in poller.poll(0))
    except (AttributeError, OSError, ValueError):  # no file (a test's runner), closed
        return False
    if gone:
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - the process's stdout to its end
    return gone


class Terminated(KeyboardInterrupt):
    """SIGTERM (`ray job stop`, a scheduler's preemption, `kill`), raised in the main thread
    where Ctrl-C raises KeyboardInterrupt, so that both stop the same way."""


# Raised inside `ray.get` or `ray.wait`, Terminated reaches the caller as a plain
# KeyboardInterrupt (Ray's core worker turns any KeyboardInterrupt of a signal handler into its
# own), so the handler also says here that SIGTERM came.
_sigterm_came = threading.Event()


def _terminated(signum: int, frame: FrameType | None) -> None:
    _sigterm_came.set()
    raise Terminated


@contextmanager
def resumable(
    kept: str | Callable[[], str], config: PipelineConfig | None = None
) -> Iterator[None]:
    """Ctrl-C or SIGTERM in the block: one line, `interrupted: <kept>` (`kept()` then, where
    what is kept is known only then), and exit 130 (143 for SIGTERM: the shell's codes) instead
    of a traceback from wherever the driver was; `config`'s experiment is marked interrupted for
    `status`, and the runs the driver left open end KILLED."""
    main = threading.current_thread() is threading.main_thread()
    _sigterm_came.clear()
    previous = signal.signal(signal.SIGTERM, _terminated) if main else None
    try:
        yield
    except DiskFullError:  # said by `fail_cleanly`, after the workers' last lines
        _clean_up(config)  # `status` is told, if the store still takes it
        raise
    except KeyboardInterrupt as stop:
        # Ray left first: a worker's late line ("Checkpoint successfully created") came after ours
        _clean_up(config)
        by = " by SIGTERM" if isinstance(stop, Terminated) or _sigterm_came.is_set() else ""
        with _ctrl_c_held(main):
            said = kept() if callable(kept) else kept
            typer.secho(f"interrupted{by}: {said}", err=True, fg=typer.colors.YELLOW)
        raise typer.Exit(143 if by else 130) from None
    finally:
        if main:
            signal.signal(signal.SIGTERM, signal.SIG_DFL if previous is None else previous)


def _clean_up(config: PipelineConfig | None) -> None:
    """After Ctrl-C, SIGTERM or a full disk: leave Ray, then mark `config`'s experiment
    interrupted. Another Ctrl-C (or SIGTERM) cuts the step it lands in short, as Ray's and
    Python's users expect of a second one; the rest is still done, and said by the caller: a
    second Ctrl-C left the bare `interrupted` of `fail_cleanly`, without what is kept."""
    from adapterfleet.orchestration.sweep import stop_ray

    for step in (stop_ray, lambda: _note_interrupted(config)):
        try:
            step()
        except KeyboardInterrupt:
            continue


@contextmanager
def _ctrl_c_held(main: bool) -> Iterator[None]:
    """Ctrl-C ignored while the block says the last line (in the main thread: elsewhere a
    signal's handler cannot be set, and Ctrl-C does not land there)."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN) if main else None
    try:
        yield
    finally:
        if main:  # None: a handler not set from Python; Python's own then
            signal.signal(
                signal.SIGINT, signal.default_int_handler if previous is None else previous
            )


@contextmanager
def resumable_run(out: Path) -> Iterator[Say]:
    """`resumable` for `train` and `fuse --adapters`: Ctrl-C or SIGTERM says which finished
    epochs are kept beside `out` for the same command to continue. Yields how the run says its
    own lines (resuming from a checkpoint): on stderr, as its epoch lines."""
    from adapterfleet.orchestration.partial_run import interrupted_line

    with resumable(lambda: interrupted_line(out)):
        yield lambda line: typer.echo(line, err=True)


def _note_interrupted(config: PipelineConfig | None) -> None:
    """Mark `config`'s experiment interrupted; a store that did not answer in time is said."""
    from adapterfleet.orchestration.sweep import note_interrupted
    from adapterfleet.registry.errors import safe_uri
    from adapterfleet.registry.interrupted import MARK_TIMEOUT_S

    if config is not None and not note_interrupted(config):
        typer.secho(
            f"the tracking store {safe_uri(config.tracking_uri)} did not answer within "
            f"{MARK_TIMEOUT_S:g} s: the runs this driver had open stay RUNNING there (status "
            "counts them stopped once the driver's heartbeat is old; the next run reopens them)",
            err=True,
            fg=typer.colors.YELLOW,
        )


def error_line(error: BaseException) -> str:
    """The message of `error` as one line, with the login of every URI in it masked."""
    return usage_line(str(error)) or type(error).__name__


def usage_line(text: str) -> str:
    """`text` as one line, with the login of every URI in it masked."""
    return mask(" ".join(text.split()))


def show_our_warnings_as_lines() -> None:
    """adapterfleet's own Python warnings (an adapter trained on another named base, a head
    left frozen, a CUDA graph not captured) as one `warning: ...` line on stderr at the command
    line, where Python wrote `path/modes.py:246: UserWarning: ...` and the source line under it,
    which read as a crash and were missed. Other packages' warnings are shown as Python shows
    them. For `main()` only: the Python API keeps Python's warnings. The adapter, fusion and
    head of one run trained on another base say it once, not once per file."""
    package = Path(__file__).resolve().parents[1]
    show = warnings.showwarning
    said: set[str] = set()

    def shown(message: Warning | str, category: type[Warning], filename: str, *rest: Any) -> None:
        if Path(filename).resolve().is_relative_to(package):
            line = usage_line(str(message))
            if (same := line.partition(" was trained on the base ")[2] or line) not in said:
                said.add(same)
                typer.secho(f"warning: {line}", err=True, fg=typer.colors.YELLOW)
        else:
            show(message, category, filename, *rest)

    warnings.showwarning = shown
    logging.getLogger("adapterfleet").addHandler(_WarningLines())


class _WarningLines(logging.Handler):
    """adapterfleet's logged warnings (the data layer's: rows skipped, a tsv that looks quoted,
    dev rows also in train) as the same `warning: ...` line: without a handler, Python's last
    resort printed the bare message, which read as neither a warning nor an error."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)

    def emit(self, record: logging.LogRecord) -> None:
        word = "warning" if record.levelno < logging.ERROR else "error"
        typer.secho(f"{word}: {usage_line(record.getMessage())}", err=True, fg="yellow")


def wrap_commands(app: typer.Typer) -> None:
    """`fail_cleanly` around every command of `app` and of its sub-apps: the CLI boundary."""
    for info in app.registered_commands:
        if info.callback is not None:
            info.callback = fail_cleanly(info.callback)
    for group in app.registered_groups:
        if group.typer_instance is not None:
            wrap_commands(group.typer_instance)


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4f}" if abs(value) < 10 else f"{value:.1f}"
    return str(value)


def metrics_table(rows: Sequence[dict[str, Any]], columns: Sequence[str] | None = None) -> None:
    """A plain Markdown table of `rows`: `columns`, else the rows' keys in first-seen order."""
    if not rows:
        typer.echo("(nothing to show)")
        return
    columns = list(columns or dict.fromkeys(key for row in rows for key in row))
    cells = [[_cell(row.get(c, "")) for c in columns] for row in rows]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(columns)]
    typer.echo("| " + " | ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)) + " |")
    typer.echo("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for row in cells:
        typer.echo("| " + " | ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)) + " |")


def table1(report: ReportResult) -> None:
    """Table 1 as `run` and `report` print it, with a warning under it for each cell no better
    than chance (table1.md says so in its notes; a reader of the console saw only the number)."""
    typer.echo(report.table)
    for note in report.unlearned:
        typer.secho(f"warning: {note}", err=True, fg=typer.colors.YELLOW)
    left = f"{plural(report.left_out, 'run')} made with other settings than the config's"
    if report.left_out and report.cells:
        typer.echo(f"note: {left} left out (table1.md lists them)")
    elif report.left_out:  # a table of dashes: why was in table1.md alone
        typer.secho(
            f"warning: {left} (with its --budget and -o) left out, none counts: give the "
            "options the runs were made with (`status -c` names what differs)",
            err=True,
            fg=typer.colors.YELLOW,
        )


def run_report(run: RunResult, training: TrainConfig) -> None:
    """What `train` and `fuse --adapters` print at the end: the best epoch's metrics, why it
    stopped before `max_epochs` where patience stopped it, and the run folder."""
    metrics_table(
        [
            {
                "task": run.task,
                "mode": run.mode,
                **run.dev_metrics,
                "lr": f"{training.learning_rate:g}",
                "best epoch": run.fit.best_epoch,
                "trainable": run.trainable_parameters,
                "examples/s": f"{run.fit.examples_per_second:.1f}",
            }
        ]
    )
    if run.fit.stop_reason == "early_stopping":  # else a reader counts the epochs and wonders
        typer.echo(
            f"stopped early after epoch {run.fit.epochs_run} of {training.max_epochs}: dev "
            f"{training.metric} had not improved for {plural(training.patience or 0, 'epoch')} "
            "(patience)"
        )
    typer.echo(f"run folder: {run.out_dir} (its settings, metrics and lineage: run.json)")
