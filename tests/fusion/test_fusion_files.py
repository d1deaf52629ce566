import json

import pytest
import torch
from helpers import batch, hidden, perturb, tiny_encoder

from adapterfleet.adapters import (
    AdapterConfig,
    WeightsFileError,
    add_adapter,
    load_adapter,
    save_adapter,
)
from adapterfleet.fusion import (
    add_fusion,
    fusion_parameters,
    load_fusion,
    save_fusion,
    set_active_fusion,
)


@pytest.fixture
def saved(tmp_path):
    model = tiny_encoder("bert")
    for name in ("a", "b"):
        add_adapter(model, name, AdapterConfig(reduction_factor=4))
        save_adapter(model, name, tmp_path / name)
    add_fusion(model, "t", ["a", "b"])
    perturb(fusion_parameters(model, "t"), scale=0.3)
    set_active_fusion(model, "t")
    save_fusion(model, "t", tmp_path / "fusion")
    return model, tmp_path


def test_round_trip_reproduces_outputs_exactly(saved):
    model, root = saved
    assert sorted(p.name for p in (root / "fusion").iterdir()) == [
        "adapter_fusion_config.json",
        "model_adapter_fusion.safetensors",
    ]
    fresh = tiny_encoder("bert")
    load_adapter(fresh, root / "a")
    load_adapter(fresh, root / "b")
    assert load_fusion(fresh, root / "fusion") == "t"
    set_active_fusion(fresh, "t")
    inputs = batch()
    assert torch.equal(hidden(fresh, inputs), hidden(model, inputs))


def test_fusion_without_its_adapters_is_refused(saved):
    _, root = saved
    fresh = tiny_encoder("bert")
    load_adapter(fresh, root / "a")
    with pytest.raises(WeightsFileError, match=r"\['b'\]"):
        load_fusion(fresh, root / "fusion")


def test_fusion_from_another_hidden_size_is_refused(saved):
    _, root = saved
    other = tiny_encoder("bert", hidden_size=48)
    with pytest.raises(WeightsFileError, match="hidden_size"):
        load_fusion(other, root / "fusion")


@pytest.mark.parametrize(
    ("key", "value", "said"),
    [
        ("temperature", "hot", "fusion temperature must be a number, got 'hot'"),
        ("value", "yes", "fusion value must be true or false, got 'yes'"),
        ("regularization_lambda", -1, "fusion regularization_lambda must be >= 0, got -1"),
        ("dropout", [0.1], r"fusion dropout must be a number, got \[0.1\]"),
    ],
)
def test_a_fusion_config_value_of_the_wrong_type_names_its_field(saved, key, value, said):
    _, root = saved
    path = root / "fusion" / "adapter_fusion_config.json"
    raw = json.loads(path.read_text())
    raw["config"][key] = value  # was "'<=' not supported between 'str' and 'int'"
    path.write_text(json.dumps(raw))
    fresh = tiny_encoder("bert")
    load_adapter(fresh, root / "a")
    load_adapter(fresh, root / "b")
    with pytest.raises(WeightsFileError, match=f"adapter_fusion_config.json: {said}"):
        load_fusion(fresh, root / "fusion")
