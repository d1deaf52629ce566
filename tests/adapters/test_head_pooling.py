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


def test_a_declared_decoder_layout_pools_the_last_token_unless_it_says_otherwise():
    """A GPT-NeoX (no built-in layout) declared without `pooling` got the first token: every
    input one prediction, a head at the majority class, and `pooling: cls` was not refused."""
    from transformers import GPTNeoXConfig, GPTNeoXModel

    from adapterfleet.adapters.architectures import SlotMap, attach_slot_map

    layout = {
        "layers": "layers", "attention_output": "attention", "attention_norm": "input_layernorm",
        "ffn_output": "mlp", "ffn_norm": "post_attention_layernorm", "norm": "pre",
    }  # fmt: skip
    torch.manual_seed(0)
    config = GPTNeoXConfig(
        hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
        vocab_size=100, max_position_embeddings=64, use_parallel_residual=False,
    )  # fmt: skip
    neox = GPTNeoXModel(config).eval()
    attach_slot_map(neox, SlotMap.from_mapping(layout, "gpt_neox"))
    model = AdapterModel(neox)
    assert model.add_head("t", HeadConfig(num_labels=3)).config.pooling == "last"
    with pytest.raises(ValueError, match=r"pooling: cls .* decoder \(gpt_neox\)"):
        model.add_head("u", HeadConfig(pooling="cls"))
    assert SlotMap.from_mapping({**layout, "pooling": "mean"}, "gpt_neox").pooling == "mean"
    assert SlotMap.from_mapping(layout, "mpnet").pooling == "cls"  # an encoder's first token
