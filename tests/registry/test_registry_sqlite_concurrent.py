"""Two processes opening the same fresh SQLite store at once both succeed (one creates the
tables, the other waits for it) instead of one failing with 'table ... already exists'."""

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

SCRIPT = (
    "import sys; from adapterfleet.registry import ensure_experiment; "
    "print(ensure_experiment(sys.argv[1], 'shared'))"
)


def test_two_processes_create_a_fresh_store_together(tmp_path):
    uri = f"sqlite:///{tmp_path / 'fresh' / 'mlflow.db'}"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", SCRIPT, uri],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(3)
    ]
    outputs = [p.communicate(timeout=120) for p in procs]
    for proc, (_, err) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, err[-2000:]
    assert len({out.strip() for out, _ in outputs}) == 1  # one experiment, the same id


TRIAL = """
import sys
from adapterfleet.registry import ensure_experiment, open_trial_run
uri = sys.argv[1]
run = open_trial_run(uri, ensure_experiment(uri, "shared"), None, "rte-rf16-lr0.001-s0",
                     params={"reduction_factor": 16, "learning_rate": 0.001, "seed": 0},
                     tags={"adapterfleet.task": "rte"})
run.log_metrics({"best_dev_accuracy": 0.7})
run.end("FINISHED")
"""
READ = (
    "import sys; from adapterfleet.registry.store import get_client, read_only_store; "
    "names = [e.name for e in get_client(sys.argv[1]).search_experiments()]; "
    "print(read_only_store(sys.argv[1]), sorted(names))"
)


@contextmanager
def _unwritable(folder: Path) -> Iterator[None]:
    """`folder` and its files made unwritable for this process: immutable (`chattr +i`) for
    root, whom file modes do not stop, else read-only modes."""
    files = [folder, *folder.iterdir()]
    if os.geteuid() != 0:
        for path in files:
            path.chmod(0o555 if path.is_dir() else 0o444)
        try:
            yield
        finally:
            for path in files:
                path.chmod(0o755 if path.is_dir() else 0o644)
        return
    chattr = shutil.which("chattr")
    made = chattr and subprocess.run([chattr, "-R", "+i", str(folder)], capture_output=True)
    if not made or made.returncode != 0:
        pytest.skip("root, and chattr cannot make the store immutable on this file system")
    try:
        yield
    finally:
        subprocess.run([chattr, "-R", "-i", str(folder)], check=True)


def test_a_store_in_a_read_only_folder_is_read_without_its_lock(tmp_path: Path) -> None:
    """A copy of the storage on a read-only mount: `predict` and `report`, which only read the
    store, ended in `PermissionError: ... mlflow.db.lock` (opening a SQLite store takes a lock
    file beside it); `report` then tried to log itself for two minutes."""
    uri = f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}"
    made = subprocess.run([sys.executable, "-c", TRIAL, uri], capture_output=True, text=True)
    assert made.returncode == 0, made.stderr[-2000:]
    (tmp_path / "store" / "mlflow.db.lock").unlink()  # as a copy without it would be
    cli = str(Path(sys.executable).with_name("adapterfleet"))
    report = [cli, "report", "shared", "--tracking-uri", uri, "--out", str(tmp_path / "report")]
    with _unwritable(tmp_path / "store"):
        read = subprocess.run([sys.executable, "-c", READ, uri], capture_output=True, text=True)
        reported = subprocess.run(report, capture_output=True, text=True, timeout=300)
    assert read.returncode == 0, read.stderr[-2000:]
    assert read.stdout.strip() == "True ['Default', 'shared']"
    assert reported.returncode == 0, reported.stderr[-2000:]
    assert reported.stdout.strip().endswith(
        f"not logged to MLflow: the store {uri} cannot be written here"
    )
    assert (tmp_path / "report" / "table1.md").is_file()
