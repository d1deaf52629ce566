"""AdamW parameter groups and the linear warm-up / decay schedule."""

from __future__ import annotations

import pytest
import torch

from adapterfleet.training import build_optimizer, build_scheduler, linear_schedule
from adapterfleet.training.optim import parameter_groups


def _lrs(total: int, warmup_ratio: float, lr: float = 1.0) -> list[float]:
    param = torch.nn.Parameter(torch.zeros(2, 2))
    optimizer = build_optimizer([param], lr, weight_decay=0.0)
    scheduler = build_scheduler(optimizer, total, warmup_ratio)
    lrs = []
    for _ in range(total):
        lrs.append(optimizer.param_groups[0]["lr"])
        param.grad = torch.ones_like(param)
        optimizer.step()
        scheduler.step()
    return [*lrs, optimizer.param_groups[0]["lr"]]


def test_warmup_rises_linearly_then_decays_linearly_to_zero():
    lrs = _lrs(total=10, warmup_ratio=0.3, lr=2.0)  # ceil(3.0) = 3 warm-up steps
    expected = [0.0, 2 / 3, 4 / 3, 2.0] + [2.0 * (10 - s) / 7 for s in range(4, 11)]
    assert lrs == pytest.approx(expected)
    assert max(lrs) == lrs[3] == 2.0


def test_without_warmup_decay_starts_at_the_full_rate():
    lrs = _lrs(total=4, warmup_ratio=0.0)
    assert lrs == pytest.approx([1.0, 0.75, 0.5, 0.25, 0.0])


def test_warmup_steps_round_up():
    factor = linear_schedule(total_steps=10, warmup=1)
    assert factor(0) == 0.0 and factor(1) == 1.0 and factor(10) == 0.0 and factor(12) == 0.0


def test_weight_decay_applies_to_matrices_only():
    layer, norm = torch.nn.Linear(3, 2), torch.nn.LayerNorm(2)
    params = [layer.weight, layer.bias, norm.weight, norm.bias]
    optimizer = build_optimizer(params, 1e-3, weight_decay=0.1)
    decay = {id(p): g["weight_decay"] for g in optimizer.param_groups for p in g["params"]}
    assert decay == {
        id(layer.weight): 0.1,
        id(layer.bias): 0.0,
        id(norm.weight): 0.0,
        id(norm.bias): 0.0,
    }
    assert sum(len(g["params"]) for g in optimizer.param_groups) == 4


def test_adamw_on_a_cpu_is_fused_and_steps_as_the_per_tensor_form():
    torch.manual_seed(0)
    start = [torch.randn(6, 5), torch.randn(5)]
    grads = [[torch.randn_like(t) for t in start] for _ in range(3)]
    results = []
    for fused in (True, False):
        params = [torch.nn.Parameter(t.clone()) for t in start]
        if fused:
            optimizer = build_optimizer(params, 1e-2, weight_decay=0.1)
            assert optimizer.defaults["fused"] is True
        else:  # torch's per-tensor loop over the same groups
            groups = parameter_groups(params, 0.1)
            optimizer = torch.optim.AdamW(groups, lr=1e-2, foreach=False)
        for step in grads:
            for param, grad in zip(params, step, strict=True):
                param.grad = grad.clone()
            optimizer.step()
        results.append(params)
    for fused, looped, first in zip(*results, start, strict=True):
        assert not torch.equal(fused, first)  # it moved
        assert torch.allclose(fused, looped, rtol=1e-6, atol=1e-7)


def test_the_fused_adamw_marks_what_it_wrote_as_modified():
    """torch's fused kernel leaves a parameter's version counter as it was; a cache keyed on it
    (a fusion layer's folded form) would keep the weights of before the step."""
    params = [torch.nn.Parameter(torch.randn(3, 3)), torch.nn.Parameter(torch.randn(3))]
    optimizer = build_optimizer(params, 1e-2, weight_decay=0.0)
    before = [p._version for p in params]
    for p in params:
        p.grad = torch.ones_like(p)
    optimizer.step()
    assert all(p._version > v for p, v in zip(params, before, strict=True))


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_adamw_on_a_gpu_is_fused_and_steps():
    param = torch.nn.Parameter(torch.ones(4, 4, device="cuda"))
    optimizer = build_optimizer([param], 1e-2, weight_decay=0.0)
    assert optimizer.defaults["fused"] is True
    param.grad = torch.ones_like(param)
    optimizer.step()
    assert torch.allclose(param, torch.full_like(param, 1 - 1e-2), atol=1e-5)
