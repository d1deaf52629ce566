import pytest
import torch
from helpers import ALL_FAMILIES, batch, hidden, perturb, tiny_encoder
from transformers import BertConfig, BertModel, OPTConfig, OPTModel

from adapterfleet.adapters import (
    AdapterConfig,
    AdapterModel,
    HeadConfig,
    UnsupportedModelError,
    adapter_modules,
    adapter_parameters,
    add_adapter,
    set_active_adapter,
    train_adapter,
)
from adapterfleet.adapters.config import BaseModelSpec, bottleneck_size

FAMILIES = list(ALL_FAMILIES)


def test_parameter_counts_match_the_reference_on_bert_base_dimensions():
    config = BertConfig(
        hidden_size=768,
        num_hidden_layers=12,
        num_attention_heads=12,
        intermediate_size=3072,
        vocab_size=100,
    )
    model = BertModel(config, add_pooling_layer=False)
    expected = {
        ("pfeiffer", 16): 894_528,
        ("pfeiffer", 2): 7_091_712,
        ("pfeiffer", 64): 230_544,
        ("houlsby", 16): 1_789_056,
    }
    for (architecture, rf), count in expected.items():
        name = f"{architecture}{rf}"
        add_adapter(model, name, AdapterConfig(architecture=architecture, reduction_factor=rf))
        assert sum(p.numel() for p in adapter_parameters(model, name)) == count


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("architecture", ["pfeiffer", "houlsby"])
def test_every_family_takes_both_placements_starting_near_identity(family, architecture):
    model = tiny_encoder(family)
    inputs = batch()
    base = hidden(model, inputs)
    add_adapter(model, "a", AdapterConfig(architecture=architecture, reduction_factor=4))
    set_active_adapter(model, "a")
    fresh = hidden(model, inputs)
    assert torch.allclose(fresh, base, atol=0.05)
    assert not torch.equal(fresh, base)
    perturb(adapter_parameters(model, "a"))
    assert (hidden(model, inputs) - base).abs().max() > 0.1
    set_active_adapter(model, None)
    assert torch.equal(hidden(model, inputs), base)


def test_pfeiffer_computes_the_reference_formula_in_a_bert_layer():
    model = tiny_encoder("bert")
    add_adapter(model, "a", AdapterConfig(reduction_factor=4))
    set_active_adapter(model, "a")
    perturb(adapter_parameters(model, "a"))
    output = model.encoder.layer[0].output
    adapter = output.LayerNorm.adapters["a"]
    layer_norm = output.LayerNorm.layer_norm
    x, r = torch.randn(2, 5, 64), torch.randn(2, 5, 32)
    h = output.dense(x)
    expected = layer_norm(
        h + adapter.adapter_up(torch.relu(adapter.adapter_down(layer_norm(h + r)))) + r
    )
    assert torch.allclose(output(x, r), expected, atol=1e-5)


def test_houlsby_adds_to_the_sublayer_output_before_the_residual():
    model = tiny_encoder("bert")
    add_adapter(model, "h", AdapterConfig(architecture="houlsby", reduction_factor=4))
    set_active_adapter(model, "h")
    perturb(adapter_parameters(model, "h"))
    attention_output = model.encoder.layer[1].attention.output
    adapter = attention_output.dropout.adapters["h"]
    x, r = torch.randn(2, 5, 32), torch.randn(2, 5, 32)
    h = attention_output.dense(x)
    delta = adapter.adapter_up(torch.nn.functional.silu(adapter.adapter_down(h)))
    expected = attention_output.LayerNorm(h + delta + r)
    assert torch.allclose(attention_output(x, r), expected, atol=1e-5)
    assert [position for _, position, _ in adapter_modules(model, "h")] == [
        "mh_adapter",
        "output_adapter",
    ] * 2


def test_unsupported_family_names_the_supported_ones_and_how_to_declare_a_layout():
    model = OPTModel(
        OPTConfig(hidden_size=32, num_hidden_layers=1, ffn_dim=64, num_attention_heads=4,
                  vocab_size=50, word_embed_proj_dim=32)
    )  # fmt: skip
    with pytest.raises(UnsupportedModelError) as caught:
        add_adapter(model, "a")
    message = str(caught.value)
    assert "'opt'" in message and "base_model_layout" in message
    assert "albert, bert, deberta, deberta-v2, distilbert, electra, gemma" in message


@pytest.mark.parametrize("rf", [0, 5, 64])
def test_reduction_factor_must_divide_the_hidden_size(rf):
    model = tiny_encoder("bert")
    with pytest.raises(ValueError, match="reduction_factor"):
        add_adapter(model, "a", AdapterConfig(reduction_factor=rf))


@pytest.mark.parametrize(
    ("hidden", "suggested"), [(32, "2 or 16"), (384, "2, 16 or 64"), (45, "3, 5 or 9"), (7, "1")]
)
def test_the_reduction_factor_error_suggests_only_factors_that_divide(hidden, suggested):
    with pytest.raises(ValueError) as caught:
        bottleneck_size(4 if hidden == 45 else 5, hidden)
    assert str(caught.value).endswith(f"choose a divisor of {hidden} such as {suggested}")


@pytest.mark.parametrize(
    ("dtype", "meant"), [("bf16", "bfloat16"), ("fp16", "float16"), ("float", "float32")]
)
def test_an_unknown_base_dtype_is_refused_with_a_did_you_mean(dtype, meant):
    with pytest.raises(ValueError) as caught:
        BaseModelSpec("minilm-l6", dtype=dtype)
    assert str(caught.value) == (
        f"dtype {dtype!r} is unknown (did you mean {meant!r}?); "
        "use one of auto, float32, bfloat16, float16"
    )


def test_bad_config_values_name_the_field():
    with pytest.raises(ValueError, match="architecture"):
        AdapterConfig(architecture="lora")
    with pytest.raises(ValueError, match="non_linearity"):
        AdapterConfig(non_linearity="softplus")
    with pytest.raises(ValueError, match="already exists"):
        model = tiny_encoder()
        add_adapter(model, "a")
        add_adapter(model, "a")


def test_training_one_adapter_moves_only_it_and_its_head():
    model = AdapterModel(tiny_encoder("bert"))
    add_adapter(model, "a", AdapterConfig(reduction_factor=4))
    add_adapter(model, "b", AdapterConfig(reduction_factor=4))
    model.add_head("a", HeadConfig(num_labels=3))
    model.add_head("b", HeadConfig(num_labels=2))
    trainable = train_adapter(model, "a")
    expected = {id(p) for p in adapter_parameters(model, "a")} | {
        id(p) for p in model.heads["a"].parameters()
    }
    assert {id(p) for p in trainable} == expected
    assert {id(p) for p in model.parameters() if p.requires_grad} == expected
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    optimizer = torch.optim.SGD(trainable, lr=1.0)
    logits = model(batch())
    assert logits.shape == (3, 3)
    torch.nn.functional.cross_entropy(logits, torch.tensor([0, 1, 2])).backward()
    optimizer.step()
    changed = {n for n, p in model.named_parameters() if not torch.equal(p, before[n])}
    assert changed and all(".adapters.a." in n or n.startswith("heads.a.") for n in changed)


def test_multiple_choice_head_scores_each_choice():
    model = AdapterModel(tiny_encoder("bert"))
    model.add_head("mc", HeadConfig(head_type="multiple_choice", num_labels=4))
    ids = torch.randint(5, 100, (2, 4, 6))
    logits = model({"input_ids": ids, "attention_mask": torch.ones_like(ids)})
    assert logits.shape == (2, 4)
