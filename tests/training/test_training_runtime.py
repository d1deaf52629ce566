"""Device, precision and batch plumbing; CUDA parts run only where a GPU is present."""

from __future__ import annotations

import pytest
import torch

from adapterfleet.training import TrainConfig, evaluate, fit
from adapterfleet.training.runtime import (
    autocast_dtype,
    count_batches,
    logits_of,
    pad_multiple,
    resolve_device,
    to_device,
    use_bf16,
)

CUDA = torch.cuda.is_available()


def test_precision_auto_is_fp32_on_cpu_and_bf16_when_asked():
    cpu = torch.device("cpu")
    assert use_bf16("auto", cpu) is False and use_bf16("fp32", cpu) is False
    assert use_bf16("bf16", cpu) is True
    assert autocast_dtype("auto", cpu) is None and autocast_dtype("bf16", cpu) == torch.bfloat16
    assert autocast_dtype("fp32", torch.device("cuda")) is None
    with pytest.raises(ValueError, match="'fp16' needs a CUDA device, got cpu; use bf16"):
        autocast_dtype("fp16", cpu)


@pytest.mark.cuda
@pytest.mark.skipif(not CUDA, reason="needs a CUDA device")
def test_precision_auto_on_cuda_is_bf16_only_where_the_gpu_has_it():
    cuda = torch.device("cuda")
    expected = torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    assert autocast_dtype("auto", cuda) == expected
    assert autocast_dtype("fp16", cuda) == torch.float16


@pytest.mark.cuda
@pytest.mark.skipif(not CUDA, reason="needs a CUDA device")
def test_fit_on_cuda_with_fp16_scales_the_loss_and_learns(make_model, task):
    model = make_model()
    config = TrainConfig(learning_rate=0.05, max_epochs=5, device="cuda", precision="fp16")
    result = fit(model, model.trainable(), task["train"], task["dev"], config)
    assert model.head.weight.dtype == torch.float32
    assert result.best_metric > 0.9


def test_fit_on_cpu_with_bf16_autocast_learns(make_model, task):
    model = make_model()
    config = TrainConfig(learning_rate=0.05, max_epochs=5, device="cpu", precision="bf16")
    result = fit(model, model.trainable(), task["train"], task["dev"], config)
    assert model.head.weight.dtype == torch.float32  # autocast, not a cast of the weights
    assert result.best_metric > 0.9
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert model.head(torch.ones(1, model.head.in_features)).dtype == torch.bfloat16
    assert evaluate(model, task["dev"], ["accuracy"], bf16=True)["accuracy"] == result.best_metric


def test_device_resolution():
    assert resolve_device("cpu").type == "cpu"
    assert resolve_device("auto").type == ("cuda" if CUDA else "cpu")
    if not CUDA:
        with pytest.raises(RuntimeError, match="device is 'cuda' but no CUDA device"):
            resolve_device("cuda")


def test_batches_and_outputs():
    batch = to_device({"x": torch.ones(2), "task": "rte"}, torch.device("cpu"))
    assert not batch["x"].is_pinned()
    assert batch["task"] == "rte" and torch.equal(batch["x"], torch.ones(2))
    logits = torch.zeros(2, 3)
    assert logits_of({"logits": logits}) is logits
    assert logits_of(type("Out", (), {"logits": logits})()) is logits
    with pytest.raises(TypeError, match="must return logits"):
        logits_of((logits,))
    assert count_batches(lambda epoch: (b for b in range(5))) == 5
    with pytest.raises(ValueError, match="no batches"):
        count_batches(lambda epoch: [])


@pytest.mark.cuda
@pytest.mark.skipif(not CUDA, reason="needs a CUDA device")
def test_fit_on_cuda_with_bf16_autocast(make_model, task):
    model = make_model()
    config = TrainConfig(learning_rate=0.05, max_epochs=5, device="cuda", precision="bf16")
    result = fit(model, model.trainable(), task["train"], task["dev"], config)
    assert next(model.parameters()).device.type == "cuda"
    assert model.head.weight.dtype == torch.float32  # autocast, not a cast of the weights
    assert result.best_metric > 0.9
    assert evaluate(model, task["dev"], ["accuracy"], bf16=True)["accuracy"] == result.best_metric


@pytest.mark.parametrize("pooling", ["cls", "mean"])
def test_batches_for_a_gpu_pad_to_a_multiple_of_8_with_the_same_logits(pooling):
    from helpers import tiny_encoder

    from adapterfleet.adapters import AdapterConfig, AdapterModel, HeadConfig, add_adapter
    from adapterfleet.data import PadCollator

    assert pad_multiple(torch.device("cuda")) == 8 and pad_multiple(torch.device("cpu")) == 1
    model = AdapterModel(tiny_encoder())
    add_adapter(model, "task", AdapterConfig("pfeiffer", 4))
    model.add_head("task", HeadConfig(num_labels=3, pooling=pooling))
    model.eval()
    rows = [{"input_ids": [1, *range(5, 5 + n), 2], "label": 0} for n in (3, 10)]
    plain, rounded = PadCollator(0)(rows), PadCollator(0, multiple_of=8)(rows)
    assert plain["input_ids"].shape[1] == 12 and rounded["input_ids"].shape[1] == 16
    with torch.no_grad():
        assert torch.allclose(model(plain), model(rounded), atol=1e-5)


def _numbers_task() -> object:
    from pathlib import Path

    from adapterfleet.data.cache import TokenizedSplit, TokenizedTask

    lengths = [3 + (5 * i) % 30 for i in range(64)]
    ids = [[1, *range(5, 5 + n - 1)] for n in lengths]
    labels = [i % 2 for i in range(64)]
    split = TokenizedSplit("t", "train", Path("t"), "", False, ids, None, labels, lengths)
    return TokenizedTask("t", ("a", "b"), False, 32, 0, split, split)


NEEDS_CUDA = [pytest.mark.cuda, pytest.mark.skipif(not CUDA, reason="needs a CUDA device")]


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=NEEDS_CUDA)])
def test_task_batches_pad_to_a_multiple_of_8_only_when_bound_for_a_gpu(device):
    from adapterfleet.training.modes import task_batches

    tokenized = _numbers_task()
    train, dev = task_batches(tokenized, TrainConfig(device=device, batch_size=8))
    for batch in [*train(0), *dev]:
        width, longest = batch["input_ids"].shape[1], int(batch["attention_mask"].sum(1).max())
        if device == "cuda":
            assert width % 8 == 0 or width == max(tokenized.train.lengths)
            assert batch["input_ids"].is_pinned()
        else:
            assert width == longest
