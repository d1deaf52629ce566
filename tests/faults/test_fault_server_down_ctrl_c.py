"""Ctrl-C while the MLflow tracking server is down: a tester's `adapterfleet run` said nothing
for five and a half minutes, then `could not mark run ... KILLED: end run (...) failed after 1
attempt over 247s` (MLflow's own retries of one request), then waited as long again for the next
sweep run, until the server came back (a second Ctrl-C changed nothing). Now the driver asks
the store once, within `MARK_TIMEOUT_S`, says that it did not answer, and stops with the
`interrupted:` line."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from fault_support import RestartableMlflowServer, checkpoint_epochs, sweep_document, wait_for
from tuning_support import write_config

pytestmark = pytest.mark.integration
# far above the ~10 s the stop takes, far below one request's 247 s of MLflow's retries
STOPPED_DEADLINE_S = 120.0


def test_ctrl_c_with_the_server_down_stops_within_seconds_and_says_why(
    restartable_mlflow_server: RestartableMlflowServer, tiny_model: Path, tmp_path: Path
) -> None:
    server = restartable_mlflow_server
    document = sweep_document(tmp_path, tiny_model, epochs=30)
    document["tracking_uri"] = server.uri
    storage = Path(document["storage"])
    config = write_config(tmp_path, document)
    command = Path(sys.executable).with_name("adapterfleet")
    log = tmp_path / "run.log"
    with log.open("wb") as out:
        driver = subprocess.Popen(
            [str(command), "run", str(config), "--num-cpus", "2"],
            cwd=tmp_path,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own group, as a terminal's foreground job
        )
    try:
        wait_for("a first epoch checkpoint", lambda: checkpoint_epochs(storage), 300)
        server.stop()
        os.killpg(driver.pid, signal.SIGINT)  # Ctrl-C
        code = driver.wait(timeout=STOPPED_DEADLINE_S)
    finally:
        if driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)
            driver.wait()
        if server.proc is None:
            server.start()
    lines = log.read_text(errors="replace").splitlines()
    assert code == 130, lines[-20:]
    said = [line for line in lines if line.startswith(f"the tracking store {server.uri} ")]
    assert said == [
        f"the tracking store {server.uri} did not answer within 5 s: the runs this driver had "
        "open stay RUNNING there (status counts them stopped once the driver's heartbeat is old; "
        "the next run reopens them)"
    ], lines[-20:]
    assert lines[-1].startswith("interrupted: "), lines[-20:]
    assert "could not mark run" not in "\n".join(lines)
