"""The MLflow UI on a tracking store, started with this interpreter's mlflow (no activated venv
needed) and without the job workers a small machine does not need."""

from __future__ import annotations

import os
import subprocess
import sys


def ui_command(uri: str, host: str, port: int) -> list[str]:
    """The command that serves the MLflow UI of `uri` on `host:port`, one worker."""
    return [
        sys.executable,
        "-m",
        "mlflow",
        "ui",
        "--backend-store-uri",
        uri,
        "--host",
        host,
        "--port",
        str(port),
        "--workers",
        "1",
    ]


def serve_ui(uri: str, host: str, port: int) -> int:
    """Run the MLflow UI of `uri` until it is stopped (Ctrl-C); its exit status."""
    env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    return subprocess.run(ui_command(uri, host, port), env=env, check=False).returncode
