"""The CLI as a user runs it: a real subprocess, exit codes and one-line errors."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _run(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "adapterfleet.cli.app", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_help_lists_the_commands():
    result = _run("--help")
    assert result.returncode == 0
    for command in ("train", "fuse", "evaluate", "demo", "tasks"):
        assert command in result.stdout


def test_bad_config_is_one_clear_line_and_exit_2(tmp_path):
    (tmp_path / "bad.yaml").write_text(
        "name: x\ndemo_tasks: true\nadapters: {reduction_factors: [0]}\n"
    )
    result = _run("tasks", "-c", str(tmp_path / "bad.yaml"))
    assert result.returncode == 2
    assert result.stderr.strip().startswith("error: adapters.reduction_factors")
    assert "Traceback" not in result.stderr


def test_missing_data_file_names_the_task_and_path(tmp_path):
    (tmp_path / "p.yaml").write_text(
        "data_root: .\ntasks:\n  t: {train: nope.tsv, dev: nope.tsv, text_fields: [s], "
        "label_names: [a, b]}\n"
    )
    result = _run("tasks", "-c", str(tmp_path / "p.yaml"))
    assert result.returncode == 2
    assert "task 't'" in result.stderr and "nope.tsv" in result.stderr
