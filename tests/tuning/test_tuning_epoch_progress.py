"""A trial's lines within a long epoch reach the driver's console beside its epoch lines:
relayed from the trial's worker (as a fusion's lines are), not sent as Tune results.

The sweep runs in a driver process of its own (`sweep_driver.py`, its own local Ray), so that
Ray's workers see the test's `ADAPTERFLEET_PROGRESS_S` (a Ray started earlier in this process
would not have it)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from tuning_support import config_document, write_config

from adapterfleet.training.callbacks import PROGRESS_ENV

pytestmark = pytest.mark.integration
DRIVER = Path(__file__).with_name("sweep_driver.py")
TRIAL = "fruit-rf4-lr0.01-s0"


def test_a_trial_says_where_its_epoch_is_on_the_driver_console(
    tiny_model: Path, tmp_path: Path
) -> None:
    document = config_document(tmp_path, tiny_model, reduction_factors=[4])
    document["adapters"]["tasks"] = ["fruit"]
    document["adapters"]["training"]["max_epochs"] = 1
    env = {**os.environ, PROGRESS_ENV: "0.001", "PYTHONPATH": os.pathsep.join(sys.path)}
    command = [sys.executable, "-u", str(DRIVER), str(write_config(tmp_path, document))]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=240)
    lines = done.stdout.splitlines()
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    within = re.compile(
        rf"^trial {re.escape(TRIAL)} epoch 1/1: [\d,]+ of 80 rows \(\d+%\), \d+ s so far, "
        r"about \d+ s left$"
    )
    said = [line for line in lines if within.match(line)]
    assert said and "80 of 80" not in said[-1], lines  # plain: no `(pid=...)`, no relay mark
    epoch = [line for line in lines if line.startswith(f"trial {TRIAL} epoch 1/1: train loss")]
    # one epoch line; the relayed lines may come after it (the worker's stdout reaches the
    # driver later than its Tune result), which a minute between them hides outside a test
    assert len(epoch) == 1, lines
    assert not any("[adapterfleet]" in line for line in lines), lines
    (results,) = (tmp_path / "runs").glob("ray/tinysweep/*/result.json")
    reported = [json.loads(line) for line in results.read_text().splitlines()]
    assert [r.get("epoch") for r in reported if "final" not in r] == [1], reported  # no more
