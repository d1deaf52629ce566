"""train_adapter trains the adapter and the head of its name; an active head of another name
stays frozen, and a warning says so."""

import warnings

import pytest
from helpers import tiny_encoder

from adapterfleet.adapters import (
    AdapterConfig,
    AdapterModel,
    HeadConfig,
    add_adapter,
    train_adapter,
)


def _model(head: str) -> AdapterModel:
    model = AdapterModel(tiny_encoder("bert"))
    add_adapter(model, "sentiment", AdapterConfig(reduction_factor=4))
    model.add_head(head, HeadConfig())
    return model


def test_an_active_head_of_another_name_stays_frozen_with_a_warning():
    model = _model("x")
    with pytest.warns(
        UserWarning, match="the active head 'x' stays frozen: it is not 'sentiment''s"
    ):
        trainable = train_adapter(model, "sentiment")
    assert not any(p.requires_grad for p in model.heads["x"].parameters())
    assert {id(p) for p in trainable}.isdisjoint(id(p) for p in model.heads["x"].parameters())


def test_the_head_of_the_adapters_name_trains_without_a_word():
    model = _model("sentiment")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        train_adapter(model, "sentiment")
    assert all(p.requires_grad for p in model.heads["sentiment"].parameters())
