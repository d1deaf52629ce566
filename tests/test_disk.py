"""A full disk recognised in the errors and log records the libraries really produce (SQLite's
SQLITE_FULL through SQLAlchemy and MLflow, Python's ENOSPC), never retried as a passing
hiccup; the pre-flight refusal of a disk with too little room for a run."""

from __future__ import annotations

import errno
import logging
import sqlite3
import time
from pathlib import Path

import pytest
from disk_support import fill, small_disk
from typer.testing import CliRunner

from adapterfleet.cli.app import app
from adapterfleet.disk import (
    MIN_FREE_ENV,
    NOTES,
    DiskFullError,
    cause_line,
    disk_full,
    is_disk_full,
    low_space,
    says_full,
    watch_library_logs,
)
from adapterfleet.errors import UserError
from adapterfleet.registry.errors import is_transient


def sqlite_full(tmp_path: Path) -> BaseException:
    """The error MLflow raises when SQLite finds no room for a write (SQLITE_FULL, which
    `max_page_count` gives without filling a disk), chained as MLflow's session wraps it."""
    import sqlalchemy
    from mlflow.exceptions import MlflowException
    from mlflow.protos.databricks_pb2 import TEMPORARILY_UNAVAILABLE

    engine = sqlalchemy.create_engine(f"sqlite:///{tmp_path / 'store.db'}")
    with engine.begin() as link:
        link.exec_driver_sql("CREATE TABLE runs (blob BLOB)")
    try:
        with engine.begin() as link:
            link.exec_driver_sql("PRAGMA max_page_count = 2")
            link.exec_driver_sql("INSERT INTO runs VALUES (?)", (b"\0" * 2**16,))
    except sqlalchemy.exc.OperationalError as error:
        try:  # what mlflow.store.db.utils.make_managed_session raises
            raise MlflowException(message=error, error_code=TEMPORARILY_UNAVAILABLE) from error
        except MlflowException as wrapped:
            return wrapped
    raise AssertionError("SQLite took the write")


def test_sqlite_full_through_mlflow_is_a_full_disk_and_not_retried(tmp_path: Path) -> None:
    """MLflow calls it TEMPORARILY_UNAVAILABLE (HTTP 503): every MLflow write was retried for
    two minutes, a trial's end and an interrupted driver's too (SIGTERM took ~100 s)."""
    error = sqlite_full(tmp_path)
    assert isinstance(error.__cause__.orig, sqlite3.OperationalError)  # type: ignore[union-attr]
    assert is_disk_full(error) and not is_transient(error)
    assert cause_line(error) == "SQLite: database or disk is full, writing the tracking store"
    line = str(disk_full(tmp_path / "runs", error))
    assert line.startswith(f"the disk holding {tmp_path / 'runs'} is full (SQLite: ")
    assert "run the same command again to continue" in line and "-o storage=DIR" in line


def test_other_errors_are_not_a_full_disk(tmp_path: Path) -> None:
    from mlflow.exceptions import MlflowException
    from mlflow.protos.databricks_pb2 import TEMPORARILY_UNAVAILABLE

    locked = MlflowException("database is locked", error_code=TEMPORARILY_UNAVAILABLE)
    assert is_transient(locked) and not is_disk_full(locked)  # still retried, as before
    for error in (
        OSError(errno.EACCES, "Permission denied", "/x"),
        ValueError("[Errno 280] not a number we know"),
        RuntimeError("no space in the name"),
    ):
        assert not is_disk_full(error), error
    assert not says_full("errno 2") and says_full("OSError: [Errno 28] Error writing bytes")


def test_enospc_anywhere_in_the_chain_names_its_file() -> None:
    full = OSError(errno.ENOSPC, "No space left on device", "/runs/sweeps/t/epoch-0002")
    try:
        try:
            raise full
        except OSError as error:
            raise RuntimeError("saving the checkpoint failed") from error
    except RuntimeError as outer:
        assert is_disk_full(outer)
        assert cause_line(outer) == (
            "OSError 28 No space left on device writing /runs/sweeps/t/epoch-0002"
        )


def test_the_library_records_of_a_full_disk_are_dropped_and_noted(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """MLflow's SQLAlchemy traceback for each failed write (the heartbeat's every minute) and
    Tune's syncer warning every ten seconds: dropped, the first kept for the sweep to stop on."""
    error = sqlite_full(tmp_path)
    watch_library_logs()
    NOTES.take()
    mlflow_log = logging.getLogger("mlflow.store.db.utils")
    with caplog.at_level(logging.WARNING):
        try:
            raise error
        except Exception:
            mlflow_log.exception("SQLAlchemy database error. The following exception is caught.")
        logging.getLogger("ray.train._internal.syncer").warning(
            "Last sync command failed with the following error:\nTraceback (most recent call "
            "last):\nOSError: [Errno 28] Error writing bytes to file. Detail: [errno 28] No space "
            "left on device"
        )
        mlflow_log.error("SQLAlchemy database error: database is locked")
    assert [record.getMessage() for record in caplog.records] == [
        "SQLAlchemy database error: database is locked"
    ]
    assert NOTES.take() == "SQLite: database or disk is full, writing the tracking store"
    assert NOTES.take() is None


def test_a_run_does_not_start_on_a_disk_with_too_little_room(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One demo run leaves about 70 MB, each with other settings adds 60-110 MB (README):
    a disk with less free than the floor is refused before anything starts, naming the folder,
    what it has, and the fix."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "t.tsv").write_text("sentence\tlabel\na b\t0\nc d\t1\n")
    config = tmp_path / "pipe.yaml"
    config.write_text(
        f"name: p\nstorage: {tmp_path / 'runs'}\ntasks:\n  a: {{train: t.tsv, dev: t.tsv, "
        "text_fields: [sentence], label_names: ['0', '1']}\n"
    )
    monkeypatch.setenv(MIN_FREE_ENV, "1e12")  # a megabyte floor no disk here reaches
    result = CliRunner().invoke(app, ["run", str(config)])
    assert result.exit_code == 2, result.output
    (line,) = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert line.startswith(f"error: storage: the disk holding {tmp_path / 'runs'} has ")
    assert line.endswith(
        "MB free, less than the 1e+12 MB a run needs (checkpoints, the tracking store, the "
        "token cache); free space there or point storage at another disk (-o storage=DIR); "
        "ADAPTERFLEET_MIN_FREE_MB=N lowers the floor"
    ), line
    assert not (tmp_path / "runs").exists()  # nothing written
    monkeypatch.setenv(MIN_FREE_ENV, "0")  # the check off
    assert low_space(tmp_path / "runs") is None
    monkeypatch.setenv(MIN_FREE_ENV, "lots")
    with pytest.raises(UserError, match="ADAPTERFLEET_MIN_FREE_MB='lots': expected the megabytes"):
        low_space(tmp_path / "runs")


def test_ending_a_run_on_a_full_disk_fails_at_once(tmp_path: Path) -> None:
    """A trial's end, and an interrupted driver's end of its sweep runs, on a really full
    disk: refused at once (it was retried for two minutes per run)."""
    from adapterfleet.registry import default_tracking_uri, ensure_experiment, open_sweep_run
    from adapterfleet.training import end_quietly

    with small_disk(tmp_path / "disk", 4) as disk:
        uri = default_tracking_uri(disk / "runs")
        run = open_sweep_run(uri, ensure_experiment(uri, "p"), "sweep-1", "a")
        fill(disk)
        said: list[str] = []
        started = time.monotonic()
        with pytest.raises(Exception) as raised:
            run.end("KILLED")
        end_quietly(run, "KILLED", said.append)
        assert time.monotonic() - started < 10
        assert is_disk_full(raised.value), raised.value
        assert said == []  # the command's own line says the disk is full (or interrupted)
        assert isinstance(disk_full(disk, raised.value), DiskFullError)
