"""Attention with packed dropout masks (`adapters/attention.py`): SDPA's math with the masks of
`keep_mask`, its gradient, SDPA itself wherever no CPU dropout is drawn, and every family that
loads with SDPA switched to it without a `bernoulli_` left in a training step."""

from __future__ import annotations

import pytest
import torch
from helpers import ALL_FAMILIES, batch, tiny_encoder
from torch import nn
from torch.nn import functional as F

from adapterfleet.adapters import (
    AdapterConfig,
    AdapterModel,
    HeadConfig,
    add_adapter,
    train_adapter,
)
from adapterfleet.adapters.architectures import SLOT_MAPS, default_pooling
from adapterfleet.adapters.attention import NAME, packed_attention, use_packed_attention
from adapterfleet.adapters.dropout import LEVELS, keep_mask


class _Attention(nn.Module):
    def __init__(self, is_causal: bool = False, groups: int = 1) -> None:
        super().__init__()
        self.is_causal = is_causal
        self.num_key_value_groups = groups


def _qkv(heads: int = 4, kv_heads: int = 4, tokens: int = 7) -> list[torch.Tensor]:
    torch.manual_seed(3)
    shapes = [(2, heads, tokens, 8), (2, kv_heads, tokens, 8), (2, kv_heads, tokens, 8)]
    return [torch.randn(*shape, requires_grad=True) for shape in shapes]


def _expected(q, k, v, allowed: torch.Tensor, p: float, seed: int) -> torch.Tensor:
    """The formula written out: softmax(q kᵀ / √d where allowed), dropped by the same draws."""
    groups = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(groups, 1), v.repeat_interleave(groups, 1)
    scores = (q @ k.transpose(-1, -2)) / q.shape[-1] ** 0.5
    probs = scores.masked_fill(~allowed, float("-inf")).softmax(-1)
    torch.manual_seed(seed)
    keep = keep_mask(probs.shape, p, probs.device)
    out = probs * keep * (LEVELS / (LEVELS - round(p * LEVELS))) @ v
    return out.transpose(1, 2)


def test_padding_mask_and_drops_match_the_formula() -> None:
    q, k, v = _qkv()
    allowed = torch.ones(2, 1, 7, 7, dtype=torch.bool)
    allowed[1, ..., 4:] = False  # the second row's last three tokens are padding
    torch.manual_seed(11)
    out, weights = packed_attention(_Attention(), q, k, v, allowed, dropout=0.3)
    assert weights is None
    expected = _expected(q, k, v, allowed, 0.3, seed=11)
    assert torch.allclose(out, expected, atol=1e-6)
    # and the gradient of every input is the formula's
    grads = torch.autograd.grad(out.square().sum(), (q, k, v))
    wanted = torch.autograd.grad(expected.square().sum(), (q, k, v))
    for got, want in zip(grads, wanted, strict=True):
        assert torch.allclose(got, want, atol=1e-5)


def test_causal_grouped_query_attention_matches_the_formula() -> None:
    q, k, v = _qkv(heads=4, kv_heads=2)
    torch.manual_seed(5)
    out, _ = packed_attention(_Attention(is_causal=True, groups=2), q, k, v, None, dropout=0.2)
    causal = torch.ones(7, 7, dtype=torch.bool).tril()
    assert torch.allclose(out, _expected(q, k, v, causal, 0.2, seed=5), atol=1e-6)


def test_a_float_mask_is_added_to_the_scores() -> None:
    q, k, v = _qkv()
    allowed = torch.rand(2, 1, 7, 7, generator=torch.Generator().manual_seed(0)) > 0.3
    allowed |= torch.eye(7, dtype=torch.bool)
    additive = torch.zeros(allowed.shape).masked_fill(~allowed, torch.finfo(torch.float32).min)
    torch.manual_seed(9)
    out, _ = packed_attention(_Attention(), q, k, v, additive, dropout=0.5)
    assert torch.allclose(out, _expected(q, k, v, allowed, 0.5, seed=9), atol=1e-6)


def test_without_dropout_it_is_sdpa() -> None:
    q, k, v = _qkv()
    allowed = torch.ones(2, 1, 7, 7, dtype=torch.bool).tril()
    out, _ = packed_attention(_Attention(), q, k, v, allowed, dropout=0.0, scaling=0.2)
    sdpa = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed, scale=0.2)
    assert torch.equal(out, sdpa.transpose(1, 2))


def test_drops_each_probability_at_p() -> None:
    """With all scores equal every probability is 1/tokens: the zeros are the drops."""
    q = torch.zeros(4, 8, 64, 16)
    torch.manual_seed(0)
    ones = torch.eye(64).expand(4, 8, 64, 64)  # V = I: the output rows are the dropped probs
    out, _ = packed_attention(_Attention(), q, q, ones, None, dropout=0.25)
    assert (out == 0).float().mean().item() == pytest.approx(0.25, abs=5e-3)
    assert out.sum(-1).mean().item() == pytest.approx(1.0, abs=5e-3)


def _sdpa_encoder(family: str, p: float) -> nn.Module:
    encoder = tiny_encoder(family, **{SLOT_MAPS[family].dropout_attr: p})
    encoder.config._attn_implementation = "sdpa"
    return encoder


# DeBERTa runs its own attention; Gemma 2 caps its scores, which SDPA refuses (it loads eager)
SDPA_FAMILIES = [f for f in ALL_FAMILIES if not f.startswith("deberta") and f != "gemma2"]


@pytest.mark.parametrize("family", SDPA_FAMILIES)
def test_every_sdpa_family_trains_without_bernoulli(family: str) -> None:
    model = AdapterModel(_sdpa_encoder(family, 0.2))
    assert model.config._attn_implementation == NAME
    add_adapter(model, "a", AdapterConfig(reduction_factor=4))
    model.add_head("a", HeadConfig(num_labels=2, pooling=default_pooling(model)))
    model.eval()
    switched = model(batch())
    model.encoder_model.config._attn_implementation = "sdpa"
    assert torch.allclose(switched, model(batch()), atol=1e-5)  # inference is SDPA's
    model.encoder_model.config._attn_implementation = NAME
    trainable = train_adapter(model, "a")
    model.train()
    with torch.profiler.profile() as profile:
        model(batch()).sum().backward()
    calls = {event.key for event in profile.key_averages()}
    assert not any("bernoulli" in call for call in calls)
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in trainable)


@pytest.mark.parametrize("family", SDPA_FAMILIES)
def test_each_family_s_training_attention_is_sdpa_s_math(family: str) -> None:
    """The calls a training step makes (padding, causal and sliding masks, GQA, each family's
    scaling), recorded, then repeated with drops so rare that none is drawn: SDPA's output
    times the survivors' scale 1 / (1 − 2⁻¹⁵)."""
    from transformers import AttentionInterface
    from transformers.integrations.sdpa_attention import sdpa_attention_forward
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    calls = []
    AttentionInterface.register("recorded", lambda *a, **kw: calls.append((a, kw)) or
                                packed_attention(*a, **kw))  # fmt: skip
    AttentionMaskInterface.register("recorded", sdpa_mask)
    model = AdapterModel(_sdpa_encoder(family, 0.2))
    model.encoder_model.set_attn_implementation("recorded")
    model.encoder_model.train()(**batch(length=24))  # 24 tokens: past ModernBERT's window of 16
    assert len(calls) == model.config.num_hidden_layers
    for args, kwargs in calls:
        assert kwargs["dropout"] > 0  # (DistilBERT's tiny config keeps its own 0.1)
        shape = torch.Size([*args[1].shape[:3], args[2].shape[2]])
        seed = next(s for s in range(100) if _none_dropped(shape, s))
        torch.manual_seed(seed)
        ours, _ = packed_attention(*args, **{**kwargs, "dropout": 1 / LEVELS})
        sdpa, _ = sdpa_attention_forward(*args, **{**kwargs, "dropout": 0.0})
        assert torch.allclose(ours, sdpa * (LEVELS / (LEVELS - 1)), atol=1e-5)


def _none_dropped(shape: torch.Size, seed: int) -> bool:
    torch.manual_seed(seed)
    return bool(keep_mask(shape, 1 / LEVELS, torch.device("cpu")).all())


def test_eager_and_deberta_encoders_are_left_alone() -> None:
    eager = tiny_encoder("llama")
    assert not use_packed_attention(eager)
    assert eager.config._attn_implementation == "eager"
    deberta = AdapterModel(tiny_encoder("deberta-v2"))
    assert deberta.config._attn_implementation != NAME


def test_a_pickled_model_trains_in_a_fresh_process(tmp_path) -> None:
    """The attention's name is registered per process: unpickling the model registers it."""
    import subprocess
    import sys
    import textwrap

    model = AdapterModel(_sdpa_encoder("bert", 0.2))
    add_adapter(model, "a", AdapterConfig(reduction_factor=4))
    model.add_head("a", HeadConfig(num_labels=2))
    torch.save({"model": model, "batch": batch()}, tmp_path / "model.pt")
    script = textwrap.dedent(f"""
        import torch
        saved = torch.load({str(tmp_path / "model.pt")!r}, weights_only=False)
        model = saved["model"].train()
        print(model.config._attn_implementation, model(saved["batch"]).shape)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == [NAME, "torch.Size([3,", "2])"]
