"""`adapterfleet run` says each data warning once: validation loads every task, and the sweep
tokenises what validation loaded instead of reading the files again (which said `skipped N
rows` twice, once per read)."""

from __future__ import annotations

import pytest
from tuning_support import config_document, run_pipeline_cli, write_config

pytestmark = pytest.mark.integration


def test_run_says_skipped_rows_and_dev_copies_once(tmp_path, tiny_model) -> None:
    document = config_document(tmp_path, tiny_model, reduction_factors=[4])
    document["tasks"].pop("water")  # one task, one trial of one epoch
    document["adapters"]["training"]["max_epochs"] = 1
    data = tmp_path / "data"
    train = data / "fruit_train.tsv"
    lines = train.read_text().splitlines()
    train.write_text("\n".join([*lines[:3], "a\tmalformed\trow", *lines[3:]]) + "\n")
    dev = data / "fruit_dev.tsv"
    dev.write_text(dev.read_text() + lines[5] + "\n")  # a train row copied into dev
    result = run_pipeline_cli(write_config(tmp_path, document), tmp_path)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-3000:]
    skipped = f"task 'fruit', train: skipped 1 row of {train} (malformed at line 4)"
    assert output.count(skipped) == 1, output
    assert output.count("task 'fruit': 1 of 41 dev rows (2.4%) are also in train") == 1, output
    assert "task fruit: registered tinysweep.adapter.fruit v1" in output
