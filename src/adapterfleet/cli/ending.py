"""How the `adapterfleet` process ends: everything Python does at exit but free its modules,
within a time limit."""

from __future__ import annotations

import atexit
import contextlib
import faulthandler
import os
import signal
import sys
import threading
from typing import NoReturn

# What an exit does after a `run` takes ~2 s here; a library's exit handler that has not
# returned after this long is stuck, and would keep a finished (or Ctrl-C'd) command alive.
EXIT_GRACE_S = 60.0


def exit_promptly(code: int, grace_s: float = EXIT_GRACE_S) -> NoReturn:
    """End the process with status `code` the way the interpreter would, less the teardown.

    What an exit must do still happens, in the interpreter's order: non-daemon threads are
    joined (thread pools told to stop first), the atexit handlers run (Ray's shutdown of a
    local cluster, MLflow's and logging's flushes), then stdout and stderr are flushed. Only
    the freeing of what torch, transformers, MLflow and Ray loaded is skipped: after `run` it
    took 3 s of a 2-core machine (1.2 s for those imports alone) for memory the system takes
    back at once anyway.

    If that has not finished after `grace_s`, the process says so, prints where each thread
    is (a bug to report), and ends with `code` all the same: what the command wrote (MLflow
    runs, checkpoints, registered versions) is on disk by then. Ctrl-C meanwhile ends it at
    once, with `code`: the command has said its last line (after Ctrl-C, `interrupted: ...`),
    and an exit handler's traceback came after it."""
    shutdown = getattr(threading, "_shutdown", None)
    if shutdown is None:  # not CPython's threading: the plain exit
        sys.exit(code)
    watchdog = threading.Timer(grace_s, _overdue, args=(code, grace_s))
    watchdog.daemon = True  # not among the threads the exit waits for
    watchdog.start()
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, lambda signum, frame: _end_now(code))
    shutdown()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        # a reader that went away (`| head`), a closed stream: nothing more can be said
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code)


def _end_now(code: int) -> NoReturn:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError, RuntimeError):  # RuntimeError: reentrant
            stream.flush()
    os._exit(code)


def _overdue(code: int, grace_s: float) -> None:
    with contextlib.suppress(OSError, ValueError):
        sys.stderr.write(
            f"adapterfleet: the exit did not finish in {grace_s:.0f} s (a thread or an exit "
            "handler is stuck; please report it with what follows); ending now\n"
        )
        sys.stderr.flush()
        faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
    os._exit(code)
