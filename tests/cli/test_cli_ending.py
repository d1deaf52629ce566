"""`exit_promptly`, how `adapterfleet` ends: everything an exit must do happens (threads joined,
thread pools stopped, atexit handlers, buffered output flushed, the status kept), and the
modules are not torn down (that took 3 s at the end of every `run`)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

CHILD = """
import atexit, sys, threading, time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from adapterfleet.cli.ending import exit_promptly

out = Path(sys.argv[1])

class Teardown:
    def __del__(self):
        (out / "torn-down").write_text("yes")

kept = Teardown()  # a module global: freed only by the interpreter's teardown
atexit.register(lambda: print("atexit ran", flush=False))

def late():
    time.sleep(0.3)
    (out / "thread").write_text("finished")

threading.Thread(target=late).start()  # not a daemon: the exit waits for it
pool = ThreadPoolExecutor(1)
pool.submit(lambda: (out / "pool").write_text("finished"))
sys.stdout.write("buffered, no newline")  # a pipe is block-buffered: not written yet
exit_promptly(3)
"""
# stdout as a program gets it from a pipe: block-buffered (PYTHONUNBUFFERED would write at once)
BUFFERED = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}


def _run(tmp_path: Path, code: str) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "child.py"
    script.write_text(textwrap.dedent(code))
    return subprocess.run(
        [sys.executable, str(script), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        env=BUFFERED,
    )


def test_what_an_exit_must_do_happens_and_the_teardown_does_not(tmp_path: Path) -> None:
    done = _run(tmp_path, CHILD)
    assert done.returncode == 3, done.stderr
    assert done.stdout == "buffered, no newlineatexit ran\n"
    assert done.stderr == ""
    assert (tmp_path / "thread").read_text() == "finished"
    assert (tmp_path / "pool").read_text() == "finished"
    assert not (tmp_path / "torn-down").exists()  # sys.exit(3) writes it


def test_a_reader_gone_before_the_end_costs_no_message_and_keeps_the_status(
    tmp_path: Path,
) -> None:
    """`adapterfleet status | head -1`: the pipe is closed when the last lines are flushed.
    Python's own exit says `Exception ignored ... BrokenPipeError` there and exits 120."""
    script = tmp_path / "child.py"
    script.write_text(
        "import sys\nfrom adapterfleet.cli.ending import exit_promptly\n"
        "sys.stdout.write('more lines\\n' * 10)\n"
        "sys.stdin.readline()  # the reader has gone by now\n"
        "exit_promptly(0)\n"
    )
    child = subprocess.Popen(
        [sys.executable, str(script)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=BUFFERED,
    )
    assert child.stdout is not None and child.stdin is not None and child.stderr is not None
    child.stdout.close()
    child.stdin.write("go\n")
    child.stdin.close()
    assert child.wait(timeout=60) == 0
    assert child.stderr.read() == ""


def test_a_stuck_exit_handler_ends_after_the_grace_with_where_each_thread_was(
    tmp_path: Path,
) -> None:
    """Something in the exit of a Ctrl-C'd `run` once did not return (in a CI run; where is
    not known): an exit handler that never returns now ends after the grace all the same."""
    done = _run(
        tmp_path,
        """
        import atexit, threading, sys
        from adapterfleet.cli.ending import exit_promptly

        def stuck_flush():
            threading.Event().wait()

        atexit.register(stuck_flush)
        print("the summary", flush=True)
        exit_promptly(130, grace_s=1.0)
        """,
    )
    assert done.returncode == 130, done.stderr
    assert done.stdout == "the summary\n"
    first, *stacks = done.stderr.splitlines()
    assert first.startswith("adapterfleet: the exit did not finish in 1 s"), done.stderr
    assert any("stuck_flush" in line for line in stacks), done.stderr
