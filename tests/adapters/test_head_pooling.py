"""A head pools what the base family pools unless told otherwise, and never a decoder's first
token: there every input would get one prediction."""

import json

import pytest
import torch
from helpers import batch, tiny_encoder

from adapterfleet.adapters import AdapterModel, HeadConfig, load_head, save_head


@pytest.mark.parametrize(
    ("family", "pooling"), [("bert", "cls"), ("gpt2", "last"), ("llama", "last")]
)
def test_a_head_without_pooling_takes_the_family_default(family, pooling):
    model = AdapterModel(tiny_encoder(family))
    assert model.add_head("t", HeadConfig()).config.pooling == pooling
    assert model.heads["t"].config.pooling == pooling


@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_a_decoder_head_by_default_tells_inputs_apart(family):
    model = AdapterModel(tiny_encoder(family))
    model.add_head("t", HeadConfig(num_labels=3))
    inputs = batch(size=3)
    inputs["input_ids"][:, 0] = 1  # every row starts with the same start token, as tokenizers do
    with torch.no_grad():
        logits = model.eval()(inputs)
    assert not torch.allclose(logits[0], logits[1]) and not torch.allclose(logits[1], logits[2])


@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_first_token_pooling_on_a_decoder_is_refused(family):
    model = AdapterModel(tiny_encoder(family))
    with pytest.raises(ValueError, match=rf"head 't', pooling: cls .* decoder \({family}\)"):
        model.add_head("t", HeadConfig(pooling="cls"))
    assert "t" not in model.heads and model.active_head is None
    model.add_head("t", HeadConfig(pooling="mean"))  # mean is fine


def test_a_saved_head_records_the_pooling_it_used(tmp_path):
    model = AdapterModel(tiny_encoder("gpt2"))
    model.add_head("t", HeadConfig())
    save_head(model, "t", tmp_path / "t")
    saved = json.loads((tmp_path / "t" / "head_config.json").read_text())
    assert saved["config"]["pooling"] == "last"
    fresh = AdapterModel(tiny_encoder("gpt2"))
    load_head(fresh, tmp_path / "t")
    assert fresh.heads["t"].config.pooling == "last"
