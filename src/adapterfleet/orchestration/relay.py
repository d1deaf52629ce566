"""The driver's console while the pipeline runs: the lines of jobs that run as Ray tasks,
relayed plain, and the libraries' own output held to the chosen `Level`.

Ray forwards every worker's stdout and stderr to the driver (`log_to_driver`), each line after a
coloured `(task pid=...)` prefix: Tune's checkpoint lines, MLflow's system-metrics INFO lines and
our own lines alike. A job run through `run_relayed` (a fusion, a baseline) says its lines through
`WorkerSay`, which marks them. In the driver `WorkerRelay` takes the place of Ray's printer among
the handlers of the worker log stream (`ray._private.ray_logging`'s dispatcher, the hook Ray
Client's log servicer uses as well): it prints the marked lines plain, through the pipeline's
`say`. Other worker lines go to Ray's printer at `--verbose` only (by default they stay in Ray's
log files of the session); Ray's own cluster messages (raylet, autoscaler) at the default level
too. `library_output` holds Ray's and MLflow's loggers to WARNING (ERROR with `--quiet`) and turns
Ray's colour codes off when stdout is not a terminal.

A relayed job ends with an end mark; `WorkerRelay.settle` waits for it, so the job's last lines
are printed before the driver says what the job returned.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

from adapterfleet.console import RELAY_MARK, RELAY_SEP, Level, MarkedSay, Say
from adapterfleet.registry.environment import driven_by, run_driver

MARK, SEP = RELAY_MARK, RELAY_SEP  # a relayed line: MARK + job + SEP + text
END = "(end of job)"
RAY_PRINTER = "ray_print_logs"  # the name Ray gives its printer of worker lines
HANDLER = "adapterfleet_relay"
T = TypeVar("T")


@dataclass(frozen=True)
class WorkerSay(MarkedSay):
    """The `Say` of a job that runs as a Ray task (`MarkedSay`: its lines marked for the
    driver's `WorkerRelay`). `driver`: the driver that made it (`run_driver`), whose runs the
    job opens."""

    driver: str = field(default_factory=run_driver)


def run_relayed(function: Callable[..., T], say: WorkerSay, *args: Any, **kwargs: Any) -> T:
    """`function(*args, say=say, **kwargs)`, then the end mark (the Ray task of a relayed job).
    The runs it opens belong to the driver that sent it, which ends them if it is stopped."""
    try:
        with driven_by(say.driver):
            return function(*args, say=say, **kwargs)
    finally:
        say(END)


def relayed_remote(function: Callable[..., Any], **options: Any) -> Any:
    """A Ray remote function running `function` through `run_relayed`, under `function`'s name;
    call it `.remote(function, WorkerSay(job), *args, **kwargs)`."""
    import ray

    return ray.remote(**options)(run_relayed).options(name=function.__name__)


def _dispatcher() -> Any:
    """Ray's dispatcher of worker log lines in this driver; None under Ray Client (its worker
    lines come another way) or where Ray moved it."""
    from ray.util.client import ray as ray_client

    if ray_client.is_connected():
        return None
    try:
        from ray._private.ray_logging import global_worker_stdstream_dispatcher
    except ImportError:
        return None
    return global_worker_stdstream_dispatcher


class WorkerRelay:
    """Prints relayed job lines plain and the other worker lines as `level` says (see the
    module); `attach` once Ray runs, `detach` gives Ray its printer back."""

    def __init__(self, say: Say, level: Level) -> None:
        self.say, self.level = say, level
        self._ended: set[str] = set()
        self._changed = threading.Condition()
        self._ray_printer: Callable[[dict], None] | None = None
        self._attached = False

    def attach(self) -> None:
        """Take the place of Ray's printer; nothing if another relay has it already."""
        dispatcher = _dispatcher()
        if dispatcher is None or any(name == HANDLER for name, _ in dispatcher.handlers):
            return
        printers = [h for name, h in dispatcher.handlers if name == RAY_PRINTER]
        self._ray_printer = printers[0] if printers else None
        dispatcher.remove_handler(RAY_PRINTER)
        dispatcher.add_handler(HANDLER, self.handle)
        self._attached = True

    def detach(self, interrupted: bool = False) -> None:
        """Give Ray its printer of worker lines back, except after Ctrl-C or SIGTERM
        (`interrupted`) below `--verbose`: the CLI leaves Ray next, and what workers print while
        Ray stops (Ray Train's `PlacementGroupCleaner` once its controller is gone) would come
        before the `interrupted:` line; it stays in Ray's log files. Ray's next start adds its
        printer again."""
        if not self._attached:
            return
        dispatcher = _dispatcher()
        if dispatcher is not None:
            dispatcher.remove_handler(HANDLER)
            muted = interrupted and self.level < Level.VERBOSE
            if self._ray_printer is not None and not muted:
                dispatcher.add_handler(RAY_PRINTER, self._ray_printer)
        self._attached = False

    def settle(self, job: str, timeout_s: float = 5.0) -> None:
        """Wait until the end mark of `job` has come (its lines are printed), `timeout_s` at
        most (a job that died never sends it)."""
        if not self._attached:
            return
        with self._changed:
            self._changed.wait_for(lambda: job in self._ended, timeout_s)
            self._ended.discard(job)

    def handle(self, data: dict) -> None:
        """The dispatcher's callback: one batch of a worker's lines (`lines`, `pid`, ...)."""
        try:
            rest = []
            for line in data.get("lines", ()):
                if line.startswith(MARK):
                    self._relay(line[len(MARK) :])
                else:
                    rest.append(line)
            if rest and self._forwards(data):
                self._print({**data, "lines": rest})
        except Exception as error:  # noqa: BLE001 - Ray's log thread must go on
            print(f"(a worker's lines were not printed: {error})", file=sys.stderr)

    def _relay(self, text: str) -> None:
        job, _, line = text.partition(SEP)
        if line == END:
            with self._changed:
                self._ended.add(job)
                self._changed.notify_all()
        else:
            self.say(line)

    def _print(self, data: dict) -> None:
        """Ray's printer for Ray's own lines (it keeps the autoscaler's events alone) and on a
        terminal; else each worker line after a plain `(task pid=N)`, as it comes: Ray's
        deduplication colours its `[repeated Nx]` notes whatever the settings."""
        ray_own = data.get("pid") in ("raylet", "autoscaler")
        if ray_own or sys.stdout.isatty():
            if self._ray_printer is not None:
                self._ray_printer(data)
            return
        name = data.get("actor_name") or data.get("task_name")
        prefix = f"({name} pid={data.get('pid')}) " if name else f"(pid={data.get('pid')}) "
        sink = sys.stderr if data.get("is_err") else sys.stdout
        for line in data["lines"]:
            print(prefix + line, file=sink, flush=True)

    def _forwards(self, data: dict) -> bool:
        if self.level >= Level.VERBOSE:
            return True
        return self.level >= Level.DEFAULT and data.get("pid") in ("raylet", "autoscaler")


LOG_LEVELS = {Level.QUIET: logging.ERROR, Level.DEFAULT: logging.WARNING}


def ray_log_level(level: Level) -> int | None:
    """The level of the driver's "ray" logger at `level` (None: Ray's own)."""
    return LOG_LEVELS.get(level)


@contextmanager
def library_output(level: Level) -> Iterator[None]:
    """Ray's and MLflow's loggers at WARNING (ERROR for `Level.QUIET`, untouched at VERBOSE)
    while the block runs; Ray's colour codes off for good when stdout is not a terminal (Ray
    prints the worker lines it held back for deduplication as late as at its shutdown).
    Importing Ray sets its logger to INFO: `ensure_ray` sets it again once Ray is imported."""
    from adapterfleet.registry.logs import tracking_log_level

    if not sys.stdout.isatty():
        os.environ["RAY_COLOR_PREFIX"] = "0"
    ray_logger = logging.getLogger("ray")
    before = ray_logger.level
    quiet = ray_log_level(level)
    controller, timer = logging.getLogger(TUNE_CONTROLLER), logging.getLogger(TUNE_TIMER)
    tune_run = logging.getLogger(TUNE_RUN)
    try:
        if quiet is None:
            yield
            return
        if "ray" in sys.modules:
            ray_logger.setLevel(quiet)
        controller.addFilter(_said_by_us)
        tune_run.addFilter(_said_by_us)
        timer.addFilter(_not_slow_notice)
        with tracking_log_level(quiet):
            yield
    finally:
        controller.removeFilter(_said_by_us)
        tune_run.removeFilter(_said_by_us)
        timer.removeFilter(_not_slow_notice)
        ray_logger.setLevel(before or logging.INFO)  # Ray's own default


# Ray's job client: loggers that set their own level, INFO, when imported
JOB_CLIENT = ("ray.dashboard.modules.dashboard_sdk", "ray.dashboard.modules.job.sdk")


@contextmanager
def job_client_output() -> Iterator[None]:
    """`library_output` at the default level for Ray's job client: what it says below a
    warning (`Uploading package ...`, `WebSocket closed ...`) is held back while the block
    runs, its warnings (a very large file in the upload) and errors are said."""
    import ray.job_submission  # noqa: F401 - Ray sets its loggers' levels when imported

    loggers = [logging.getLogger(name) for name in JOB_CLIENT]
    before = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.WARNING)
    try:
        with library_output(Level.DEFAULT):
            yield
    finally:
        for logger, level in zip(loggers, before, strict=True):
            logger.setLevel(level)


TUNE_CONTROLLER = "ray.tune.execution.tune_controller"
TUNE_RUN = "ray.tune.tune"  # `Trials did not complete: [...]` as the sweep ends
TUNE_TIMER = "ray.tune.utils.util"  # `warn_if_slow`: an operation of the Tune loop that took long


def _said_by_us(record: logging.LogRecord) -> bool:
    """Tune's ERROR with the traceback of a trial that raised: the trial's own line says it
    (`trial ...: failed (<cause>)`), and the traceback stays in the trial's log; and its ERROR
    `Trials did not complete: [adapter_trial_b3d49_00000, ...]` as the sweep ends, which the
    trials' `FAILED` lines and the sweep's error say by the names the user knows."""
    return not str(record.msg).startswith(("Trial task failed", "Trials did not complete"))


def _not_slow_notice(record: logging.LogRecord) -> bool:
    """Tune's `The callbacks.on_trial_result operation took 1.254 s, which may be a performance
    bottleneck.`: about Tune's own loop (the registration callback waits on the tracking
    store), nothing a user can act on; at `--verbose` it is said."""
    return "may be a performance bottleneck" not in record.getMessage()


@contextmanager
def console(level: Level, say: Say) -> Iterator[WorkerRelay]:
    """`library_output(level)` and a `WorkerRelay` over `say` (to attach once Ray runs) for
    the block."""
    relay = WorkerRelay(say, level)
    with library_output(level):
        try:
            yield relay
        except KeyboardInterrupt:  # SIGTERM too, in the CLI (cli/output.py)
            relay.detach(interrupted=True)
            raise
        finally:
            relay.detach()
