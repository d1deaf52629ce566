"""How the `adapterfleet` process ends: everything Python does at exit but free its modules."""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
import threading
from typing import NoReturn


def exit_promptly(code: int) -> NoReturn:
    """End the process with status `code` the way the interpreter would, less the teardown.

    What an exit must do still happens, in the interpreter's order: non-daemon threads are
    joined (thread pools told to stop first), the atexit handlers run (Ray's shutdown of a
    local cluster, MLflow's and logging's flushes), then stdout and stderr are flushed. Only
    the freeing of what torch, transformers, MLflow and Ray loaded is skipped: after `run` it
    took 3 s of a 2-core machine (1.2 s for those imports alone) for memory the system takes
    back at once anyway."""
    shutdown = getattr(threading, "_shutdown", None)
    if shutdown is None:  # not CPython's threading: the plain exit
        sys.exit(code)
    shutdown()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        # a reader that went away (`| head`), a closed stream: nothing more can be said
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code)
