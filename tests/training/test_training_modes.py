"""The single-task modes name their adapter once: a mode's adapter, an adapter's row of Table 1,
and the refusals of `train_single` (before any model is built)."""

from __future__ import annotations

import pytest

from adapterfleet.adapters import AdapterConfig
from adapterfleet.training import TrainConfig
from adapterfleet.training.modes import (
    ADAPTER_MODES,
    SINGLE_TASK_MODES,
    adapter_mode,
    mode_adapter,
    train_single,
)


def test_each_adapter_mode_trains_its_architecture_and_is_named_back_by_it() -> None:
    assert SINGLE_TASK_MODES == ("head", "full", "st-a", "st-a-houlsby")
    assert mode_adapter("head") is None and mode_adapter("full", 8) is None
    assert mode_adapter("st-a") == AdapterConfig("pfeiffer", 16)
    assert mode_adapter("st-a-houlsby", 8) == AdapterConfig("houlsby", 8)
    for mode, architecture in ADAPTER_MODES.items():
        assert adapter_mode(AdapterConfig(architecture, 4)) == mode


@pytest.mark.parametrize(
    ("mode", "adapter", "message"),
    [
        ("fusion", None, "not a single-task mode"),
        ("head", AdapterConfig("pfeiffer"), "trains no adapter"),
        ("st-a-houlsby", AdapterConfig("pfeiffer"), "trains a houlsby adapter, not a pfeiffer"),
    ],
)
def test_train_single_refuses_a_mode_and_adapter_that_disagree(mode, adapter, message) -> None:
    with pytest.raises(ValueError, match=message):
        train_single(mode, None, "unused", TrainConfig(), "unused", adapter=adapter)  # type: ignore[arg-type]
