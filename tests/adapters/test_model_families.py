"""Every built-in family beyond the BERT five, on tiny random models: placements, one training
step of ST-A and of a fusion, the fusion identity, save/load, declared layouts, pooling, and a
half-precision base with float32 adapters."""

from __future__ import annotations

import pytest
import torch
from helpers import DECODERS, NEW_FAMILIES, batch, hidden, perturb, tiny_encoder

from adapterfleet.adapters import (
    AdapterConfig,
    AdapterModel,
    HeadConfig,
    adapter_parameters,
    add_adapter,
    load_adapter,
    save_adapter,
    set_active_adapter,
    train_adapter,
)
from adapterfleet.adapters.architectures import (
    SLOT_MAPS,
    SlotMap,
    attach_slot_map,
    default_pooling,
    layout_problem,
)
from adapterfleet.adapters.base_model import enable_checkpointing
from adapterfleet.adapters.heads import pool
from adapterfleet.fusion import FusionConfig, add_fusion, set_active_fusion, train_fusion

FAMILIES = list(NEW_FAMILIES)


def _step(model: AdapterModel, trainable: list[torch.nn.Parameter]) -> set[str]:
    """One SGD step on a 3-row batch; the names of the parameters it changed."""
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    optimizer = torch.optim.SGD(trainable, lr=1.0)
    logits = model(batch())
    torch.nn.functional.cross_entropy(logits, torch.tensor([0, 1, 0])).backward()
    optimizer.step()
    return {n for n, p in model.named_parameters() if not torch.equal(p, before[n])}


@pytest.mark.parametrize("family", FAMILIES)
def test_one_st_a_step_moves_only_the_adapter_and_its_head(family):
    model = AdapterModel(tiny_encoder(family))
    add_adapter(model, "a", AdapterConfig(reduction_factor=4))
    model.add_head("a", HeadConfig(num_labels=2, pooling=default_pooling(model)))
    changed = _step(model, train_adapter(model, "a"))
    assert any(".adapters.a." in n for n in changed)
    assert all(".adapters.a." in n or n.startswith("heads.a.") for n in changed)


@pytest.mark.parametrize("family", FAMILIES)
def test_one_fusion_step_moves_only_the_fusion_and_its_head(family):
    model = AdapterModel(tiny_encoder(family))
    for seed, name in enumerate(("a", "b")):
        add_adapter(model, name, AdapterConfig(reduction_factor=4))
        perturb(adapter_parameters(model, name), seed=seed, scale=0.05)
    add_fusion(model, "t", ["a", "b"])
    model.add_head("t", HeadConfig(num_labels=2, pooling=default_pooling(model)))
    changed = _step(model, train_fusion(model, "t"))
    assert any(".fusions.t." in n for n in changed)
    assert all(".fusions.t." in n or n.startswith("heads.t.") for n in changed)


@pytest.mark.parametrize("family", FAMILIES)
def test_a_fusion_over_one_adapter_equals_that_adapter_at_initialisation(family):
    model = tiny_encoder(family)
    add_adapter(model, "p", AdapterConfig(reduction_factor=4))
    perturb(adapter_parameters(model, "p"), scale=0.05)
    set_active_adapter(model, "p")
    alone = hidden(model, batch())
    add_fusion(model, "f", ["p"], FusionConfig(value=False, regularization=False))
    set_active_fusion(model, "f")
    assert torch.allclose(hidden(model, batch()), alone, atol=1e-5)


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("architecture", ["pfeiffer", "houlsby"])
def test_save_and_load_reproduce_the_outputs(family, architecture, tmp_path):
    model = tiny_encoder(family)
    add_adapter(model, "a", AdapterConfig(architecture, 4))
    perturb(adapter_parameters(model, "a"), scale=0.2)
    set_active_adapter(model, "a")
    save_adapter(model, "a", tmp_path / "a")
    fresh = tiny_encoder(family)
    set_active_adapter(fresh, load_adapter(fresh, tmp_path / "a"))
    assert torch.equal(hidden(fresh, batch()), hidden(model, batch()))


def test_pre_norm_pfeiffer_is_the_reference_formula_in_a_llama_layer():
    """h + r + delta(h + r), with r the residual stream before the feed-forward sub-layer."""
    model = tiny_encoder("llama")
    add_adapter(model, "a", AdapterConfig(reduction_factor=4))
    perturb(adapter_parameters(model, "a"), scale=0.3)
    set_active_adapter(model, "a")
    layer = model.layers[0]
    slot, norm = layer.mlp, layer.post_attention_layernorm
    adapter = slot.adapters["a"]
    r = torch.randn(2, 5, 32)
    h = slot.inner(norm.inner(r))
    expected = h + r + adapter.adapter_up(torch.relu(adapter.adapter_down(h + r)))
    assert torch.allclose(r + slot(norm(r)), expected, atol=1e-6)


def test_albert_shares_one_adapter_across_its_layers():
    model = tiny_encoder("albert")  # two layers that run one shared layer
    add_adapter(model, "a", AdapterConfig(reduction_factor=4))
    assert sum(p.numel() for p in adapter_parameters(model, "a")) == 32 * 8 + 8 + 8 * 32 + 32


def test_a_declared_layout_gives_the_built_in_outputs():
    built_in, declared = tiny_encoder("llama"), tiny_encoder("llama")
    layout = {
        "layers": "layers",
        "attention_output": "self_attn",
        "attention_norm": "input_layernorm",
        "ffn_output": "mlp",
        "ffn_norm": "post_attention_layernorm",
        "norm": "pre",
        "pooling": "last",
        "dropout_attr": "attention_dropout",
    }
    attach_slot_map(declared, SlotMap.from_mapping(layout))
    assert SlotMap.from_mapping(layout) == SLOT_MAPS["llama"]
    for model in (built_in, declared):
        torch.manual_seed(0)
        add_adapter(model, "a", AdapterConfig(reduction_factor=4))
        perturb(adapter_parameters(model, "a"), scale=0.3)
        set_active_adapter(model, "a")
    assert torch.equal(hidden(declared, batch()), hidden(built_in, batch()))


def test_a_path_the_model_lacks_is_named():
    model = tiny_encoder("llama")
    wrong = SlotMap("layers", "self_attn", "input_layernorm", "mlp", "post_ffn_norm", True)
    field, problem = layout_problem(model, wrong)
    assert field == "ffn_norm" and "'post_ffn_norm'" in problem and "mlp" in problem
    assert layout_problem(model, SLOT_MAPS["llama"]) is None


@pytest.mark.parametrize("family", DECODERS)
def test_decoders_pool_the_last_real_token_by_default(family):
    assert default_pooling(tiny_encoder(family)) == "last"


@pytest.mark.parametrize("family", DECODERS)
def test_a_decoder_classifies_without_building_a_key_value_cache(family):
    """A classifier never generates: no cache to fill (memory, and Gemma 3's cache copies from
    the host as it starts, which a CUDA graph cannot hold)."""
    model = AdapterModel(tiny_encoder(family))
    model.add_head("task", HeadConfig(num_labels=2, pooling="last"))
    outputs = []
    model.encoder_model.register_forward_hook(lambda module, args, out: outputs.append(out))
    model(batch())
    assert outputs[0].past_key_values is None


def test_pooling_finds_the_last_real_token_with_either_padding_side():
    hidden_states = torch.arange(2 * 4 * 1, dtype=torch.float).view(2, 4, 1)
    right = torch.tensor([[1, 1, 0, 0], [1, 1, 1, 1]])
    left = torch.tensor([[0, 0, 1, 1], [1, 1, 1, 1]])
    assert pool(hidden_states, right, "last").flatten().tolist() == [1.0, 7.0]
    assert pool(hidden_states, left, "last").flatten().tolist() == [3.0, 7.0]
    assert pool(hidden_states, right, "mean").flatten().tolist() == [0.5, 5.5]
    assert pool(hidden_states, right, "cls").flatten().tolist() == [0.0, 4.0]


def test_a_bf16_base_trains_float32_adapters_fusions_and_heads():
    model = AdapterModel(tiny_encoder("llama").to(torch.bfloat16))
    add_adapter(model, "a", AdapterConfig(reduction_factor=4))
    add_fusion(model, "t", ["a"])
    model.add_head("t", HeadConfig(num_labels=2, pooling="last"))
    trained = train_fusion(model, "t")
    assert {p.dtype for p in trained} == {torch.float32}
    assert {p.dtype for p in adapter_parameters(model, "a")} == {torch.float32}
    assert next(model.encoder_model.parameters()).dtype == torch.bfloat16
    changed = _step(model, trained)
    assert any(".fusions.t." in n for n in changed)


def test_gradient_checkpointing_gives_the_same_gradients():
    grads = []
    for checkpointing in (False, True):
        model = AdapterModel(tiny_encoder("llama"))
        if checkpointing:
            enable_checkpointing(model.encoder_model)
        add_adapter(model, "a", AdapterConfig(reduction_factor=4))
        model.add_head("a", HeadConfig(num_labels=2, pooling="last"))
        trainable = train_adapter(model, "a")
        model.train()
        torch.nn.functional.cross_entropy(model(batch()), torch.tensor([0, 1, 0])).backward()
        grads.append([p.grad.clone() for p in trainable])
    for plain, checkpointed in zip(*grads, strict=True):
        assert torch.allclose(plain, checkpointed, atol=1e-6)


def test_one_pre_norm_model_holds_one_placement():
    model = tiny_encoder("gpt2")
    add_adapter(model, "p", AdapterConfig("pfeiffer", 4))
    with pytest.raises(ValueError, match="one placement"):
        add_adapter(model, "h", AdapterConfig("houlsby", 4))


def test_a_declared_layout_may_count_positions_over_the_real_tokens():
    """A declared GPT-2-like decoder (absolute positions) gave another prediction to a row
    left-padded in a batch than alone; the key that fixes it was refused as unknown."""
    from adapterfleet.config import ConfigError
    from adapterfleet.config.base_model import parse_layout

    gpt2 = {
        "layers": "h", "attention_output": "attn", "attention_norm": "ln_1", "ffn_output": "mlp",
        "ffn_norm": "ln_2", "norm": "pre", "dropout_attr": "attn_pdrop",
    }  # fmt: skip
    layout = parse_layout({**gpt2, "positions_from_mask": True})
    declared = SlotMap.from_mapping(dict(layout), "gpt2")
    assert declared == SLOT_MAPS["gpt2"]  # the built-in GPT-2's, position counting included
    assert not SlotMap.from_mapping(dict(parse_layout(gpt2)), "gpt2").positions_from_mask
    with pytest.raises(ConfigError, match=r"positions_from_mask: 'yes' must be true or false"):
        parse_layout({**gpt2, "positions_from_mask": "yes"})
    model = AdapterModel(tiny_encoder("gpt2"))
    attach_slot_map(model, declared)
    model.add_head("t", HeadConfig(num_labels=2))
    ids = torch.tensor([[5, 6, 7, 8]])
    padded = {"input_ids": torch.tensor([[0, 0, 5, 6, 7, 8], [1, 2, 3, 4, 5, 6]])}
    padded["attention_mask"] = torch.tensor([[0, 0, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1]])
    with torch.no_grad():
        alone = model.eval()({"input_ids": ids, "attention_mask": torch.ones_like(ids)})
        batched = model({**padded})
    torch.testing.assert_close(batched[0], alone[0], atol=1e-5, rtol=1e-5)
