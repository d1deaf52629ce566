"""`resources.max_concurrent_trials`: a sweep on a cluster others use too takes no more than its
share. Two one-CPU trials on a two-CPU Ray run side by side; with the cap at 1, one at a time."""

from __future__ import annotations

import re

import pytest
from tuning_support import config_document

from adapterfleet.config import ConfigError, parse_config
from adapterfleet.orchestration.sweep import run_adapter_stage

pytestmark = pytest.mark.integration
RUNNING = re.compile(r"trials \d+ done, (\d+) running, \d+ pending")


def _running(lines: list[str]) -> list[int]:
    return [int(m.group(1)) for line in lines if (m := RUNNING.search(line))]


@pytest.mark.parametrize("cap", [None, 1])
def test_a_sweep_runs_no_more_trials_at_once_than_its_cap(ray_local, tiny_model, tmp_path, cap):
    document = config_document(tmp_path, tiny_model, reduction_factors=[4])
    document["adapters"]["training"].update(max_epochs=3)
    document["resources"] = {"cpu": 1, **({} if cap is None else {"max_concurrent_trials": cap})}
    config = parse_config(document, tmp_path)
    lines: list[str] = []
    registered = run_adapter_stage(config, progress=lines.append)
    assert sorted(registered) == ["fruit", "water"]
    running = _running(lines)
    assert running, lines
    assert max(running) == (2 if cap is None else 1), lines


def test_the_cap_is_a_whole_number_of_trials(tmp_path, tiny_model):
    document = config_document(tmp_path, tiny_model)
    document["resources"] = {"max_concurrent_trials": 0}
    with pytest.raises(ConfigError, match="resources.max_concurrent_trials"):
        parse_config(document, tmp_path)
