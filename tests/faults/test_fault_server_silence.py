"""The console while the tracking server is down: trials and registrations wait through
MLflow's retries for minutes, and the driver said nothing all that time. The driver's heartbeat
thread now asks the server's `/health` and says when it stops answering and when it answers
again, once each (a real `mlflow server`, stopped and started on the same port and store)."""

from __future__ import annotations

import threading
import time

import pytest
from fault_support import RestartableMlflowServer, wait_for

from adapterfleet.registry import ensure_experiment
from adapterfleet.registry.heartbeat import HEARTBEAT_ENV, heartbeat

pytestmark = pytest.mark.integration


def test_the_driver_says_when_the_server_goes_silent_and_when_it_is_back(
    restartable_mlflow_server: RestartableMlflowServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = restartable_mlflow_server
    monkeypatch.setenv(HEARTBEAT_ENV, "0.5")  # a question every half second
    experiment_id = ensure_experiment(server.uri, "silence")
    lines: list[str] = []
    lock = threading.Lock()

    def say(line: str) -> None:
        with lock:
            lines.append(line)

    with heartbeat(server.uri, experiment_id, say):
        server.stop()
        wait_for("the silence said", lambda: lines, 30)
        server.start()
        wait_for("the answer said", lambda: len(lines) > 1, 30)
        time.sleep(2.0)  # four more questions, answered: nothing more is said
    print("\n".join(lines))
    assert len(lines) == 2, lines
    down, back = lines
    assert down.startswith(f"tracking URI {server.uri}: no answer from {server.uri}/health"), down
    assert "the trials and registrations wait for it" in down
    assert back.startswith(f"tracking URI {server.uri}: the server answers again after "), back
