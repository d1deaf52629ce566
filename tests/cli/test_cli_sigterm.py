"""SIGTERM while the driver waits inside Ray: still said as SIGTERM, exit 143. Ctrl-C while a
thread of the driver waits on a job (a fusion gate): the driver leaves Ray and nothing starts
it again."""

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import IO

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


def start_driver(tmp_path: Path, source: str, log: IO[str]) -> subprocess.Popen[bytes]:
    """`source` run as a driver in a session of its own, its output to `log`."""
    script = tmp_path / "driver.py"
    script.write_text(source)
    return subprocess.Popen(
        [sys.executable, str(script)], stdout=log, stderr=subprocess.STDOUT,
        start_new_session=True, env={**os.environ, "PYTHONPATH": ":".join(sys.path)},
    )  # fmt: skip


def signal_driver(tmp_path: Path, source: str, sig: signal.Signals) -> tuple[int, str]:
    """Run `source` as a driver, send it `sig` a second after it says "waiting": its exit
    status and output."""
    log_path = tmp_path / "driver.log"
    with open(log_path, "w") as log:
        driver = start_driver(tmp_path, source, log)
        try:
            deadline = time.monotonic() + 120
            while "waiting" not in log_path.read_text():
                assert driver.poll() is None, log_path.read_text()[-3000:]
                assert time.monotonic() < deadline, "the driver never reached its wait"
                time.sleep(0.1)
            time.sleep(1.0)  # well inside the wait
            os.kill(driver.pid, sig)
            driver.wait(timeout=120)
        finally:
            if driver.poll() is None:
                os.killpg(driver.pid, signal.SIGKILL)
    return driver.returncode, log_path.read_text()


def test_sigterm_inside_ray_get_is_said_as_sigterm(tmp_path: Path) -> None:
    """Ray's core worker turns whatever a signal handler raises inside `ray.get` into a plain
    KeyboardInterrupt: `kill PID` then read as Ctrl-C (exit 130, no "by SIGTERM"), as in one CI
    run of the sweep's SIGTERM test. The handler's own record decides now."""
    code, output = signal_driver(tmp_path, DRIVER, signal.SIGTERM)
    assert code == 143, output[-3000:]
    assert output.rstrip().splitlines()[-1] == "interrupted by SIGTERM: kept", output[-3000:]
    assert "Traceback" not in output, output[-3000:]


# A fusion gate's thread waits on its job in `ray.get` while Ctrl-C stops the main thread.
GATE = textwrap.dedent(
    """
    import logging, sys, threading, time

    import ray
    import typer

    from adapterfleet.cli.output import resumable
    from adapterfleet.orchestration.sweep import cancel_while_joined, ensure_ray

    @ray.remote
    def slow():
        time.sleep(120)

    def gate(ref):
        try:
            ray.get(ref)
        except BaseException:
            cancel_while_joined(ref)  # what FusionGate does when its wait fails

    try:
        with resumable("kept"):
            ensure_ray(None, 1, logging.ERROR)
            thread = threading.Thread(target=gate, args=(slow.remote(),), daemon=True)
            thread.start()
            print("waiting", flush=True)
            thread.join()
    except typer.Exit as stop:
        thread.join(timeout=60)
        print(f"gate done: {not thread.is_alive()}, Ray after: {ray.is_initialized()}")
        sys.exit(stop.exit_code)
    """
)


def test_ctrl_c_while_a_thread_waits_on_ray_starts_no_new_ray(tmp_path: Path) -> None:
    """The gate's `ray.get` fails once Ctrl-C's handling has left Ray; its `ray.cancel` then
    started a new local Ray from that thread (Ray's auto-init; "SIGTERM handler is not set
    because current thread is not the main thread") in a process on its way out."""
    code, output = signal_driver(tmp_path, GATE, signal.SIGINT)
    assert code == 130, output[-3000:]
    assert output.rstrip().splitlines()[-2:] == [
        "interrupted: kept",
        "gate done: True, Ray after: False",
    ], output[-3000:]
    assert "SIGTERM handler is not set" not in output, output[-3000:]


def test_the_console_script_turns_ray_auto_init_off() -> None:
    """Every command starts or joins Ray itself; a stray Ray call fails instead."""
    code = (  # main() ends the process; its atexit handlers run first (cli/ending.py)
        "import atexit, os, sys; from adapterfleet.cli.app import main; sys.argv = "
        "['adapterfleet', '--version']; atexit.register(lambda: print(os.environ.get("
        "'RAY_ENABLE_AUTO_CONNECT'))); main()"
    )
    env = {k: v for k, v in os.environ.items() if k != "RAY_ENABLE_AUTO_CONNECT"}
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )
    assert result.stdout.splitlines()[-1] == "0", result.stdout + result.stderr


# Ctrl-C after Ctrl-C: each lands in a slow step of the clean-up, as on a busy machine where
# leaving a local Ray takes seconds, marking the experiment interrupted waits on the store, and
# Ray's exit handler leaves it again. The driver ends as `adapterfleet` does (`main`).
REPEATED = textwrap.dedent(
    """
    import atexit, time

    import adapterfleet.cli.output as output
    import adapterfleet.orchestration.sweep as sweep
    from adapterfleet.cli.ending import exit_promptly
    from adapterfleet.cli.output import fail_cleanly, resumable

    def slow(what):
        def step(*args):
            print(f"{what} started", flush=True)
            time.sleep(30)
        return step

    sweep.stop_ray = slow("stop_ray")
    output._note_interrupted = slow("note_interrupted")
    atexit.register(slow("exit handler"))

    @fail_cleanly
    def command():
        with resumable("kept"):
            print("waiting", flush=True)
            time.sleep(120)

    try:
        command()
    except BaseException as stop:  # typer.Exit
        exit_promptly(stop.exit_code)
    """
)


def test_ctrl_c_after_ctrl_c_cuts_the_clean_up_short_and_still_says_what_is_kept(
    tmp_path: Path,
) -> None:
    """A second Ctrl-C during `stop_ray` or `_note_interrupted` reached `fail_cleanly`, which
    printed the bare `interrupted`: what is kept and how to continue were lost. Each Ctrl-C now
    cuts its step short, and the line is said all the same."""
    log_path = tmp_path / "driver.log"
    with open(log_path, "w") as log:
        driver = start_driver(tmp_path, REPEATED, log)
        try:
            for after in ("waiting", "stop_ray started", "note_interrupted started", "exit han"):
                deadline = time.monotonic() + 60
                while after not in log_path.read_text() and driver.poll() is None:
                    assert time.monotonic() < deadline, log_path.read_text()[-3000:]
                    time.sleep(0.05)
                time.sleep(0.3)
                if driver.poll() is None:
                    os.kill(driver.pid, signal.SIGINT)
            driver.wait(timeout=20)  # each step cut short: not its 30 s
        finally:
            if driver.poll() is None:
                os.killpg(driver.pid, signal.SIGKILL)
    output = log_path.read_text()
    assert driver.returncode == 130, output[-3000:]
    assert output.splitlines()[-2:] == ["interrupted: kept", "exit handler started"], output
    assert "Traceback" not in output and "Exception ignored" not in output, output
