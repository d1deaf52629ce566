"""A regression head (one output, a declared range) and its MSE loss learn a number on a tiny
random encoder; the best epoch of a lower-is-better metric is its lowest; the head's files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from helpers import tiny_encoder

from adapterfleet.adapters import AdapterModel, HeadConfig, load_head, save_head
from adapterfleet.data.cache import TokenizedSplit, TokenizedTask
from adapterfleet.training import TrainConfig, fit
from adapterfleet.training.modes import head_for, head_loss, train_single
from adapterfleet.training.state import LoopState


def _split(n: int, seed: int, name: str) -> TokenizedSplit:
    """Rows of "low" (20-59) and "high" (60-99) token ids; the label is 5 x the high share."""
    generator = torch.Generator().manual_seed(seed)
    ids, labels = [], []
    for _ in range(n):
        length = int(torch.randint(5, 12, (1,), generator=generator))
        high = torch.rand(length, generator=generator) < torch.rand(1, generator=generator)
        low_ids = torch.randint(20, 60, (length,), generator=generator)
        tokens = torch.where(high, low_ids + 40, low_ids).tolist()
        ids.append([2, *tokens])
        labels.append(round(5 * high.float().mean().item(), 2))
    lengths = [len(row) for row in ids]
    return TokenizedSplit("sts", name, Path(name), "", False, ids, None, labels, lengths)


@pytest.fixture(scope="module")
def numbers_task() -> TokenizedTask:
    train, dev = _split(256, 1, "train"), _split(128, 2, "dev")
    return TokenizedTask("sts", (), False, 16, 0, train, dev, True, (0.0, 5.0))


def test_head_config_of_a_regression_task_and_its_refusals(numbers_task) -> None:
    head = head_for(numbers_task)
    assert (head.head_type, head.out_features, head.value_range) == ("regression", 1, [0.0, 5.0])
    assert head.regression_scale == (0.0, 5.0)
    assert "value_range" not in HeadConfig(num_labels=2).to_dict()  # classification files as before
    for bad, message in [
        ({"num_labels": 2}, "num_labels must be 1 for regression"),
        ({"num_labels": 1, "value_range": [5, 0]}, "low < high"),
        ({"num_labels": 1, "value_range": [0]}, r"\[low, high\]"),
    ]:
        with pytest.raises(ValueError, match=message):
            HeadConfig(head_type="regression", **bad)
    with pytest.raises(ValueError, match="for regression heads only"):
        HeadConfig(num_labels=2, value_range=[0, 1])


def test_the_head_maps_its_output_to_the_range_and_the_loss_back(numbers_task) -> None:
    model = AdapterModel(tiny_encoder())
    model.add_head("sts", head_for(numbers_task))
    head = model.heads["sts"].eval()
    pooled = torch.randn(4, 32)
    raw = head.layers(pooled)
    assert torch.allclose(head(pooled), 5.0 * raw)  # low 0 + width 5 x the last layer
    outputs, labels = torch.tensor([[1.0], [4.0]]), torch.tensor([2.0, 2.0])
    loss = head_loss(head.config)(outputs, labels)  # (1/25 + 4/25) / 2
    assert loss.item() == pytest.approx(0.1)
    assert head_loss(HeadConfig(num_labels=2)) is None  # cross-entropy


def test_a_regression_head_saves_and_loads_with_its_range(numbers_task, tmp_path) -> None:
    model = AdapterModel(tiny_encoder())
    model.add_head("sts", head_for(numbers_task))
    save_head(model, "sts", tmp_path / "head")
    saved = json.loads((tmp_path / "head" / "head_config.json").read_text())["config"]
    assert saved["head_type"] == "regression" and saved["value_range"] == [0.0, 5.0]
    other = AdapterModel(tiny_encoder())
    load_head(other, tmp_path / "head")
    assert other.heads["sts"].config == model.heads["sts"].config


def test_best_epoch_of_a_lower_is_better_metric_is_its_lowest() -> None:
    state = LoopState()
    for epoch, value in enumerate([0.9, 0.5, 0.7], start=1):
        state.epoch = epoch
        state.record(value, higher_is_better=False)
    assert (state.best_metric, state.best_epoch, state.epochs_without_improvement) == (0.5, 2, 1)


def test_regression_learns_a_number_with_mse(numbers_task, tmp_path) -> None:
    config = TrainConfig(learning_rate=3e-3, max_epochs=4, batch_size=16, metric="mse")
    metrics = ("pearson", "spearman", "mse")
    run = train_single("full", numbers_task, tiny_encoder(), config, tmp_path, metrics=metrics)
    history = run.fit.history
    assert history[-1]["train_loss"] < history[0]["train_loss"] / 3
    best = min(h["dev_mse"] for h in history)
    assert run.fit.best_metric == best == run.dev_metrics["mse"]  # lowest mse is the best
    assert run.dev_metrics["pearson"] > 0.9 and run.dev_metrics["spearman"] > 0.9
    assert run.dev_metrics["mse"] < 0.5  # in score units: the labels' variance is about 2.5


class _Line(torch.nn.Module):
    """y = W x + b: one output per example (a regression), or a logit per class."""

    def __init__(self, outputs: int = 1) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(4, outputs)

    def forward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        return self.linear(batch["x"])


def test_fit_on_float_labels_defaults_to_mse_and_the_regression_metrics() -> None:
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(128, 4, generator=generator)
    y = x @ torch.tensor([1.0, -2.0, 0.5, 0.0]) + 0.1 * torch.randn(128, generator=generator)
    batches = [{"x": x[i : i + 16], "labels": y[i : i + 16]} for i in range(0, 128, 16)]
    torch.manual_seed(0)
    model = _Line()
    config = TrainConfig(learning_rate=0.1, max_epochs=10, metric="pearson")
    result = fit(model, list(model.parameters()), batches, batches, config)  # no loss, no names
    assert set(result.best_metrics) == {"pearson"} and result.best_metric > 0.99
    assert result.history[-1]["train_loss"] < result.history[0]["train_loss"] / 4


def test_a_loss_that_is_no_longer_a_number_stops_the_fit_with_the_fixes() -> None:
    """A regression label of 1e300 with no declared range trained on to `train loss nan` and
    saved a NaN adapter and head; the fit now stops at that epoch, naming the fixes."""
    from adapterfleet.errors import UserError

    x = torch.randn(32, 4, generator=torch.Generator().manual_seed(0))
    y = torch.ones(32)
    y[5] = 1e30  # squared: inf in float32
    batches = [{"x": x[i : i + 16], "labels": y[i : i + 16]} for i in range(0, 32, 16)]
    model = _Line()
    config = TrainConfig(learning_rate=0.01, max_epochs=3, metric="mse")
    with pytest.raises(UserError) as caught:
        fit(model, list(model.parameters()), batches, batches, config)
    assert str(caught.value) == (
        "epoch 1: the mean train loss is inf: training diverged; lower learning_rate (now 0.01), "
        "check the labels (a regression task: declare their range, which scales them), or train "
        "in fp32"
    )


def test_a_loss_blown_up_yet_finite_stops_the_fit_as_diverged() -> None:
    """A fusion at learning_rate 1e12 trained to `train loss 4364776791722643324649078784.0`,
    finite, so it was registered; predicting 1.0/0.0 for every row, it tied on dev and took
    @best. A mean loss a million times the first batch's is now a diverged fit."""
    from adapterfleet.errors import UserError

    x = torch.randn(64, 4, generator=torch.Generator().manual_seed(0))
    y = (x[:, 0] > 0).long()
    batches = [{"x": x[i : i + 16], "labels": y[i : i + 16]} for i in range(0, 64, 16)]
    torch.manual_seed(0)
    model = _Line(outputs=2)
    config = TrainConfig(learning_rate=1e12, max_epochs=3, metric="accuracy")
    with pytest.raises(UserError, match=r"^epoch 1: the mean train loss is .*e\+\d+, over 1e\+06 "
                       r"times the first batch's \(\d\.\d+\): training diverged; lower "
                       r"learning_rate \(now 1e\+12\)"):  # fmt: skip
        fit(model, list(model.parameters()), batches, batches, config)
    sane = TrainConfig(learning_rate=0.1, max_epochs=3, metric="accuracy")
    model = _Line(outputs=2)
    assert fit(model, list(model.parameters()), batches, batches, sane).best_metric > 0.75
