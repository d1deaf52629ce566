"""Fixtures for the fault tests (helpers in fault_support.py)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from fault_support import RestartableMlflowServer  # noqa: E402


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
