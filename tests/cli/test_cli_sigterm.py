"""SIGTERM while the driver waits inside Ray: still said as SIGTERM, exit 143."""

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

# The driver's main thread blocked in `ray.get`, as Tune's loop often is: a real local Ray.
DRIVER = textwrap.dedent(
    """
    import logging, sys, time

    import ray
    import typer

    from adapterfleet.cli.output import resumable
    from adapterfleet.orchestration.sweep import ensure_ray

    @ray.remote
    def slow():
        time.sleep(120)

    try:
        with resumable("kept"):
            ensure_ray(None, 1, logging.ERROR)
            pending = slow.remote()
            print("waiting", flush=True)
            ray.get(pending)
    except typer.Exit as stop:
        sys.exit(stop.exit_code)
    """
)


def test_sigterm_inside_ray_get_is_said_as_sigterm(tmp_path: Path) -> None:
    """Ray's core worker turns whatever a signal handler raises inside `ray.get` into a plain
    KeyboardInterrupt: `kill PID` then read as Ctrl-C (exit 130, no "by SIGTERM"), as in one CI
    run of the sweep's SIGTERM test. The handler's own record decides now."""
    script = tmp_path / "driver.py"
    script.write_text(DRIVER)
    log_path = tmp_path / "driver.log"
    with open(log_path, "w") as log:
        driver = subprocess.Popen(
            [sys.executable, str(script)], stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True, env={**os.environ, "PYTHONPATH": ":".join(sys.path)},
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 120
            while "waiting" not in log_path.read_text():
                assert driver.poll() is None, log_path.read_text()[-3000:]
                assert time.monotonic() < deadline, "the driver never reached ray.get"
                time.sleep(0.1)
            time.sleep(1.0)  # well inside ray.get
            os.kill(driver.pid, signal.SIGTERM)
            driver.wait(timeout=120)
        finally:
            if driver.poll() is None:
                os.killpg(driver.pid, signal.SIGKILL)
    output = log_path.read_text()
    assert driver.returncode == 143, output[-3000:]
    assert output.rstrip().splitlines()[-1] == "interrupted by SIGTERM: kept", output[-3000:]
    assert "Traceback" not in output, output[-3000:]
