"""TrainConfig validation and its dict round trip."""

from __future__ import annotations

import json

import pytest

from adapterfleet.training import TrainConfig


@pytest.mark.parametrize(
    ("field", "value", "allowed"),
    [
        ("learning_rate", 0.0, "> 0"),
        ("learning_rate", float("nan"), "> 0"),
        ("max_epochs", 0, ">= 1"),
        ("batch_size", 2.5, ">= 1"),
        ("eval_batch_size", 0, ">= 1"),
        ("warmup_ratio", 1.5, "in [0.0, 1.0]"),
        ("weight_decay", -0.1, ">= 0.0"),
        ("grad_accum_steps", 0, ">= 1"),
        ("patience", 0, ">= 1 or null (off; None in Python)"),
        ("metric", "auc", "['accuracy', 'f1', 'f1_macro'"),
        ("seed", -1, ">= 0"),
        ("max_grad_norm", 0.0, "> 0 or None"),
        ("precision", "fp8", "['auto', 'fp32', 'bf16', 'fp16']"),
        ("device", "tpu", "['auto', 'cpu', 'cuda']"),
        ("progress", "yes", "true or false"),
        ("max_epochs", True, ">= 1"),
    ],
)
def test_invalid_field_is_named_with_allowed_values(field, value, allowed):
    with pytest.raises(ValueError) as info:
        TrainConfig(**{field: value})
    message = str(info.value)
    assert f"TrainConfig.{field} " in message and allowed in message and "\n" not in message


def test_defaults_and_optional_fields_are_valid():
    config = TrainConfig(patience=None, max_grad_norm=None, warmup_ratio=1.0, weight_decay=0)
    assert config.patience is None and config.max_grad_norm is None


def test_dict_round_trip_through_json():
    config = TrainConfig(learning_rate=3e-4, patience=3, metric="f1", precision="bf16")
    data = json.loads(json.dumps(config.to_dict()))
    assert TrainConfig.from_dict(data) == config


def test_from_dict_refuses_unknown_fields():
    with pytest.raises(ValueError, match=r"unknown key\(s\) \['lr'\]; allowed: learning_rate, "):
        TrainConfig.from_dict({"lr": 0.1})
