"""Dropout with CPU masks from packed random bits (`adapters/dropout.py`): the distribution of
`nn.Dropout` (independent drops at p, survivors scaled to keep the expectation), seeded, with
the matching gradient, and in place of every `nn.Dropout` of a model that trains adapters."""

from __future__ import annotations

import pytest
import torch
from helpers import batch, tiny_encoder
from torch import nn

from adapterfleet.adapters import AdapterConfig, AdapterModel, HeadConfig, add_adapter
from adapterfleet.adapters.dropout import LEVELS, PackedDropout, keep_mask, pack_dropout
from adapterfleet.fusion import add_fusion

COUNT = 1 << 22  # 4 M draws: the standard error of a drop fraction near 0.1 is 1.5e-4


@pytest.mark.parametrize("p", [0.1, 0.3, 0.5, 0.9])
def test_drops_at_p_independently(p: float) -> None:
    torch.manual_seed(0)
    kept = keep_mask(torch.Size([COUNT]), p, torch.device("cpu"))
    dropped = ~kept
    assert dropped.float().mean().item() == pytest.approx(p, abs=1e-3)
    # each quarter of a random word alike: the top one holds 15 random bits, not 16
    for quarter in range(4):
        assert dropped[quarter::4].float().mean().item() == pytest.approx(p, abs=2e-3)
    # neighbours drop independently: pairs both dropped at p², not more
    both = (dropped[:-1] & dropped[1:]).float().mean().item()
    assert both == pytest.approx(p * p, abs=1.5e-3)


def test_survivors_keep_the_expectation() -> None:
    torch.manual_seed(1)
    layer = PackedDropout(0.1).train()
    out = layer(torch.ones(COUNT))
    kept = out != 0
    dropped = round(0.1 * LEVELS)
    assert torch.all(out[kept] == LEVELS / (LEVELS - dropped))
    assert out.mean().item() == pytest.approx(1.0, abs=2e-3)


def test_seeded_masks_repeat_and_differ_between_seeds() -> None:
    layer = PackedDropout(0.5).train()
    x = torch.ones(4, 64, 32)
    masks = []
    for seed in (7, 7, 8):
        torch.manual_seed(seed)
        masks.append(layer(x) != 0)
    assert torch.equal(masks[0], masks[1])
    assert not torch.equal(masks[0], masks[2])


def test_gradient_is_the_mask() -> None:
    torch.manual_seed(2)
    x = torch.randn(8, 16, 24, requires_grad=True)
    out = PackedDropout(0.25).train()(x)
    out.backward(torch.ones_like(out))
    kept = out.detach() != 0
    assert 0 < kept.float().mean().item() < 1
    assert torch.all(x.grad[~kept] == 0)
    assert torch.allclose(x.grad[kept], torch.tensor(4 / 3))
    assert torch.allclose(out.detach()[kept], x.detach()[kept] * 4 / 3)


def test_eval_p_zero_p_one_and_inplace() -> None:
    x = torch.randn(3, 5)
    assert torch.equal(PackedDropout(0.5).eval()(x), x)
    assert torch.equal(PackedDropout(0.0).train()(x), x)
    assert torch.equal(PackedDropout(1.0).train()(x), torch.zeros_like(x))
    y = x.clone()
    torch.manual_seed(3)
    out = PackedDropout(0.5, inplace=True).train()(y)
    assert out.data_ptr() == y.data_ptr() and torch.any(out == 0) and torch.any(out != 0)


def test_a_bf16_input_stays_bf16() -> None:
    out = PackedDropout(0.1).train()(torch.ones(64, 64, dtype=torch.bfloat16))
    assert out.dtype == torch.bfloat16 and torch.any(out == 0)


def test_the_model_s_dropout_is_packed_everywhere() -> None:
    """Encoder, adapters' fusion and head: no plain `nn.Dropout` left, p unchanged, and a
    training forward drops (two seeds give two outputs), an eval forward does not."""
    encoder = tiny_encoder("bert")
    before = {name: m.p for name, m in encoder.named_modules() if type(m) is nn.Dropout}
    model = AdapterModel(encoder)
    after = dict(model.encoder_model.named_modules())
    for name in ("a", "b"):
        add_adapter(model, name, AdapterConfig("pfeiffer", reduction_factor=4))
    add_fusion(model, "t", ["a", "b"])
    model.add_head("t", HeadConfig(num_labels=2))
    plain = [n for n, m in model.named_modules() if type(m) is nn.Dropout]
    packed = [m for m in model.modules() if isinstance(m, PackedDropout)]
    assert plain == [] and len(packed) >= 5
    assert before and all(type(after[name]) is PackedDropout for name in before)
    assert {name: after[name].p for name in before} == before
    inputs = batch(size=2, length=6)
    model.train()
    outs = []
    for seed in (0, 1):
        torch.manual_seed(seed)
        outs.append(model(inputs))
    assert not torch.allclose(outs[0], outs[1])
    model.eval()
    assert torch.equal(model(inputs), model(inputs))


def test_pack_dropout_leaves_subclasses_and_other_modules() -> None:
    class Special(nn.Dropout):
        pass

    module = nn.Sequential(nn.Dropout(0.1), Special(0.2), nn.Linear(2, 2), nn.Dropout(0.3))
    module.eval()
    assert pack_dropout(module) == 2
    kinds = [type(m) for m in module]
    assert kinds == [PackedDropout, Special, nn.Linear, PackedDropout]
    assert [m.p for m in (module[0], module[3])] == [0.1, 0.3]
    assert not module[0].training  # the mode carries over
