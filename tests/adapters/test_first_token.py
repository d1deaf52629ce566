"""The last layer at the first token only (`adapters/first_token.py`): the same logits and
gradients as the whole layer, on every family it applies to, and the whole layer wherever
something reads more than the first token."""

from __future__ import annotations

import pytest
import torch
from helpers import batch, perturb, tiny_encoder

from adapterfleet.adapters import (
    AdapterConfig,
    AdapterModel,
    HeadConfig,
    adapter_parameters,
    add_adapter,
    train_adapter,
)
from adapterfleet.adapters.architectures import encoder_layers, slot_map_for
from adapterfleet.adapters.base_model import enable_checkpointing
from adapterfleet.adapters.first_token import FAMILIES, every_position
from adapterfleet.adapters.heads import pool
from adapterfleet.fusion import add_fusion, capture_fusion_weights, train_fusion

TOKENS = 7


def _fusion_model(family: str, pooling: str = "cls", layers: int = 2) -> AdapterModel:
    model = AdapterModel(tiny_encoder(family, num_hidden_layers=layers))
    for name in ("a", "b"):
        add_adapter(model, name, AdapterConfig("pfeiffer", reduction_factor=4))
    perturb(list(model.encoder_model.parameters()), scale=0.05)
    add_fusion(model, "t", ["a", "b"])
    model.add_head("t", HeadConfig(num_labels=3, pooling=pooling))
    train_fusion(model, "t")
    return model.eval()  # no dropout: the two forms draw different random masks


def _last_ffn_widths(model: AdapterModel) -> list[int]:
    """The token count the last layer's feed-forward norm sees, per forward from now on."""
    widths: list[int] = []
    norm = encoder_layers(model)[-1].get_submodule(slot_map_for(model).ffn_norm)
    norm.register_forward_pre_hook(lambda _m, args: widths.append(args[0].shape[1]))
    return widths


def _logits_and_grads(model: AdapterModel, whole: bool) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """The model's own forward, or the head on the whole last layer's first token (`whole`);
    the gradient of every trainable parameter (a 0 for one the loss does not reach: the fusion's
    key bias, which the softmax cancels)."""
    inputs = batch(size=3, length=TOKENS)
    trained = [p for p in model.parameters() if p.requires_grad]
    for p in trained:
        p.grad = None
    if whole:
        hidden = model.encoder_model(**inputs).last_hidden_state
        logits = model.heads["t"](pool(hidden, inputs["attention_mask"], "cls"))
    else:
        logits = model(inputs)
    (logits.square().sum() + logits[:, 0].sum()).backward()
    return logits.detach(), [torch.zeros(()) if p.grad is None else p.grad for p in trained]


def _assert_same(a: torch.Tensor, b: torch.Tensor) -> None:
    assert (a - b).abs().max() <= 1e-5 * max(b.abs().max().item(), 1e-6)


def _assert_cut_and_exact(model: AdapterModel) -> None:
    """The model's forward ran its last layer at one token, with the whole layer's logits and
    gradients."""
    widths = _last_ffn_widths(model)
    logits, grads = _logits_and_grads(model, whole=False)
    assert widths == [1]
    whole_logits, whole_grads = _logits_and_grads(model, whole=True)
    assert widths == [1, TOKENS]
    _assert_same(logits, whole_logits)
    assert len(grads) == len(whole_grads) > 0
    for grad, whole_grad in zip(grads, whole_grads, strict=True):
        _assert_same(grad, whole_grad)


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_a_first_token_head_runs_the_last_layer_at_one_token_with_the_same_gradients(family):
    _assert_cut_and_exact(_fusion_model(family))


def test_a_houlsby_adapter_trains_with_the_same_gradients_at_one_token():
    model = AdapterModel(tiny_encoder("bert"))
    add_adapter(model, "t", AdapterConfig("houlsby", reduction_factor=4))
    model.add_head("t", HeadConfig(num_labels=3))
    perturb(adapter_parameters(model, "t"), scale=0.3)
    train_adapter(model, "t")
    _assert_cut_and_exact(model.eval())


@pytest.mark.parametrize("pooling", ["mean", "last"])
def test_a_head_pooling_more_than_the_first_token_gets_the_whole_last_layer(pooling):
    model = _fusion_model("bert", pooling=pooling)
    widths = _last_ffn_widths(model)
    model(batch(size=3, length=TOKENS))
    assert widths == [TOKENS]


def test_the_fusion_weight_capture_sees_every_token_of_the_last_layer():
    model = _fusion_model("bert")
    with torch.no_grad(), capture_fusion_weights(model, "t") as captured:
        model(batch(size=3, length=TOKENS))
    assert [w[0].shape for w in captured.values()] == [(3, TOKENS, 2)] * 2
    widths = _last_ffn_widths(model)
    with every_position(model), every_position(model):
        model(batch(size=3, length=TOKENS))
    model(batch(size=3, length=TOKENS))
    assert widths == [TOKENS, 1]  # the nested blocks unwound


@pytest.mark.parametrize(
    ("family", "layers"), [("albert", 2), ("deberta-v2", 1), ("bert", 1), ("modernbert", 2)]
)
def test_a_shared_single_or_pre_norm_last_layer_runs_whole(family, layers):
    """ALBERT's one layer runs twelve times; a one-layer DeBERTa-v2 feeds its first layer's every
    position to a convolution; a pre-norm layer adds its residual inside the layer's code."""
    model = AdapterModel(tiny_encoder(family, num_hidden_layers=layers))
    add_adapter(model, "a", AdapterConfig("pfeiffer", reduction_factor=4))
    model.add_head("t", HeadConfig(num_labels=2, pooling="cls"))
    widths = _last_ffn_widths(model)
    model(batch(size=3, length=TOKENS))
    assert widths == [TOKENS] * (2 if family == "albert" else 1)


def test_with_activation_checkpointing_the_last_layer_runs_whole_and_trains():
    """The recomputation in backward runs outside the forward: it must see what the forward saw."""
    model = _fusion_model("bert")
    enable_checkpointing(model.encoder_model)
    model.train()
    widths = _last_ffn_widths(model)
    logits = model(batch(size=3, length=TOKENS))
    logits.sum().backward()
    assert widths == [TOKENS, TOKENS]  # the forward, then its recomputation
    trained = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    assert all(p.grad is not None for n, p in trained if not n.endswith("key.bias"))
