"""scripts/ui_screenshots.sh, the parts that need neither Chromium nor a running UI: its help,
its usage errors, and a clear refusal when Chromium or adapterfleet is missing."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "ui_screenshots.sh"
BASH = shutil.which("bash") or "/bin/bash"


def run_script(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [BASH, str(SCRIPT), *args],
        env=env if env is not None else dict(os.environ),
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_help_says_what_it_writes_and_how_to_point_it_at_a_store() -> None:
    result = run_script("-h")
    assert result.returncode == 0, result.stderr
    for words in ("runs.png", "fusion-run.png", "models.png", "-c CONFIG", "-o K=V", "CHROMIUM"):
        assert words in result.stdout
    assert "set -uo" not in result.stdout  # the help ends where the comment does


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["-x"], "unknown option -x"),
        (["-c"], "-c needs a value"),
        (["-s", "wide"], "-s wants WIDTH,HEIGHT"),
        (["extra"], "unexpected argument 'extra'"),
    ],
)
def test_usage_errors_exit_2(args: list[str], words: str) -> None:
    result = run_script(*args)
    assert result.returncode == 2
    assert words in result.stderr


def test_refuses_clearly_without_chromium(tmp_path: Path) -> None:
    """No chromium on PATH (an empty one): exit 3 and how to install it, before anything
    else is started."""
    env = {"PATH": str(tmp_path), "HOME": str(tmp_path)}
    result = run_script("-c", "configs/demo.yaml", env=env)
    assert result.returncode == 3
    assert "chromium not found" in result.stderr
    assert "apt-get install -y chromium" in result.stderr
    assert "CHROMIUM=" in result.stderr
    assert result.stdout == ""


def test_refuses_a_chromium_that_is_not_there(tmp_path: Path) -> None:
    env = {**os.environ, "CHROMIUM": str(tmp_path / "no-chromium")}
    result = run_script(env=env)
    assert result.returncode == 3
    assert f"chromium not found at {tmp_path / 'no-chromium'}" in result.stderr


def test_refuses_a_missing_adapterfleet(tmp_path: Path) -> None:
    true = shutil.which("true") or "/bin/true"
    env = {**os.environ, "CHROMIUM": true, "ADAPTERFLEET": str(tmp_path / "no-adapterfleet")}
    result = run_script(env=env)
    assert result.returncode == 3
    assert "adapterfleet not found" in result.stderr
    assert list(tmp_path.iterdir()) == []  # nothing written, nothing started
