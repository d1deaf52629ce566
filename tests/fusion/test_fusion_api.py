"""The fusion functions refuse what would break the model later, each in words that name the fix."""

import pytest
import torch
from helpers import batch, tiny_encoder

from adapterfleet.adapters import AdapterConfig, adapter_configs, add_adapter, delete_adapter
from adapterfleet.fusion import add_fusion, delete_fusion, fusion_setups, set_active_fusion


def _fused(family: str = "bert"):
    model = tiny_encoder(family)
    for name in ("a", "b"):
        add_adapter(model, name, AdapterConfig(reduction_factor=4))
    add_fusion(model, "fab", ["a", "b"])
    set_active_fusion(model, "fab")
    return model


def test_an_adapter_a_fusion_uses_cannot_be_deleted():
    model = _fused()
    with pytest.raises(ValueError) as error:
        delete_adapter(model, "a")
    assert str(error.value) == (
        "adapter 'a' is used by fusion 'fab'; delete the fusion first (delete_fusion(model, 'fab'))"
    )
    assert set(adapter_configs(model)) == {"a", "b"}
    with torch.no_grad():
        model(**batch())  # still runs
    delete_fusion(model, "fab")
    delete_adapter(model, "a")
    assert set(adapter_configs(model)) == {"b"}


def test_deleting_an_adapter_the_model_lacks_is_skipped_as_adapterhub_does():
    model = _fused()
    delete_adapter(model, "zzz")
    assert set(adapter_configs(model)) == {"a", "b"}


def test_a_string_of_adapter_names_is_refused_not_read_letter_by_letter():
    model = tiny_encoder("bert")
    for name in ("a", "b", "ab"):
        add_adapter(model, name, AdapterConfig(reduction_factor=4))
    with pytest.raises(TypeError, match=r"fusion 'x': adapter_names must be a list .* \['ab'\]"):
        add_fusion(model, "x", "ab")
    assert "x" not in fusion_setups(model)


def test_mean_fusion_weights_leaves_active_what_was_active():
    from adapterfleet.adapters import AdapterModel, HeadConfig, set_active_adapter
    from adapterfleet.fusion import mean_fusion_weights

    model = AdapterModel(_fused())
    model.add_head("t", HeadConfig())
    set_active_adapter(model, "a")
    model.eval()
    with torch.no_grad():
        before = model(batch())
        weights = mean_fusion_weights(model, "fab", [batch()])
        assert torch.equal(model(batch()), before)  # adapter a alone, as before
    assert weights.shape == (2, 2)
