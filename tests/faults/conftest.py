"""Fixtures for the fault tests (helpers in fault_support.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fault_support import RestartableMlflowServer


@pytest.fixture
def restartable_mlflow_server(tmp_path: Path) -> Iterator[RestartableMlflowServer]:
    root = tmp_path / "mlflow-server"
    root.mkdir()
    server = RestartableMlflowServer(root)
    server.start()
    try:
        yield server
    finally:
        server.stop()
