"""MLflow's own log lines (creating the database tables, system metrics started and stopped):
how loud they are, in this process and in the processes it starts."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

LEVEL_VARIABLE = "MLFLOW_LOGGING_LEVEL"  # read by MLflow when it is imported


@contextmanager
def tracking_log_level(level: int) -> Iterator[None]:
    """MLflow logs at `level` and above while the block runs: its logger now if it is imported,
    else when it is (MLflow reads `MLFLOW_LOGGING_LEVEL` then), and in the processes started
    meanwhile (a local Ray's workers inherit the variable)."""
    before = os.environ.get(LEVEL_VARIABLE)
    os.environ[LEVEL_VARIABLE] = logging.getLevelName(level)
    logger = logging.getLogger("mlflow")
    logged = logger.level
    if "mlflow" in sys.modules:
        logger.setLevel(level)
    try:
        yield
    finally:
        logger.setLevel(logged or logging.INFO)  # MLflow's own default
        if before is None:
            os.environ.pop(LEVEL_VARIABLE, None)
        else:
            os.environ[LEVEL_VARIABLE] = before


@contextmanager
def quieter(name: str, level: int = logging.WARNING) -> Iterator[None]:
    """MLflow's logger `name` at `level` at least for the block: its INFO line "Waiting up to
    300 seconds for model version to finish creation", printed between a command's own lines
    on every registration with a tracking server, says nothing a user acts on."""
    logger = logging.getLogger(name)
    before = logger.level
    logger.setLevel(max(level, logger.getEffectiveLevel()))
    try:
        yield
    finally:
        logger.setLevel(before)
