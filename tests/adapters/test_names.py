"""Names of adapters, heads and fusions: an unknown one is named with those present, whichever
function is given it."""

import pytest
from helpers import tiny_encoder

from adapterfleet.adapters import (
    AdapterConfig,
    AdapterModel,
    HeadConfig,
    add_adapter,
    save_adapter,
    save_head,
)
from adapterfleet.fusion import add_fusion, save_fusion


@pytest.fixture
def model():
    model = AdapterModel(tiny_encoder("bert"))
    for name in ("a", "b"):
        add_adapter(model, name, AdapterConfig(reduction_factor=4))
    add_fusion(model, "f", ["a", "b"])
    model.add_head("h", HeadConfig())
    return model


@pytest.mark.parametrize(
    ("save", "kind", "present"),
    [(save_adapter, "adapter", "a, b"), (save_head, "head", "h"), (save_fusion, "fusion", "f")],
)
def test_saving_an_unknown_name_says_what_is_present(model, tmp_path, save, kind, present):
    with pytest.raises(KeyError) as error:
        save(model, "zzz", tmp_path / "out")
    assert error.value.args[0] == f"{kind} 'zzz' is not in this model ({kind}s present: {present})"
    assert not (tmp_path / "out").exists()


def test_a_dot_in_a_head_or_fusion_name_is_refused_as_in_an_adapter_name(model):
    with pytest.raises(ValueError, match=r"adapter name 'x\.y' must use letters, digits"):
        add_adapter(model, "x.y")
    with pytest.raises(ValueError, match=r"head name 'x\.y' must use letters, digits"):
        model.add_head("x.y", HeadConfig())
    with pytest.raises(ValueError, match=r"fusion name 'x\.y' must use letters, digits"):
        add_fusion(model, "x.y", ["a", "b"])
    assert "x.y" not in model.heads
