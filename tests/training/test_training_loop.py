"""`fit` on a tiny frozen-base classifier: learning, what changes, early stopping, callbacks."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch

from adapterfleet.training import Callback, EpochReport, FitResult, TrainConfig, evaluate, fit

FAST = {"learning_rate": 0.05, "max_grad_norm": None, "device": "cpu"}


class Recorder(Callback):
    """Keeps every report and a copy of the trainable tensors after each epoch."""

    def __init__(self, params: list[torch.nn.Parameter], stop_at: int | None = None) -> None:
        self.params, self.stop_at = params, stop_at
        self.reports: list[EpochReport] = []
        self.snapshots: list[list[torch.Tensor]] = []
        self.results: list[FitResult] = []

    def on_epoch_end(self, report: EpochReport) -> bool:
        self.reports.append(report)
        self.snapshots.append([p.detach().clone() for p in self.params])
        return report.epoch == self.stop_at

    def on_fit_end(self, result: FitResult) -> None:
        self.results.append(result)


def test_learns_separable_task_well_above_majority(make_model, task):
    model = make_model()
    result = fit(model, model.trainable(), task["train"], task["dev"], TrainConfig(**FAST))
    majority = max(task["dev_labels"].float().mean().item(), 1 - task["dev_labels"].float().mean())
    assert result.best_metric > 0.9
    assert result.best_metric > majority + 0.15
    assert evaluate(model, task["dev"], ["accuracy"])["accuracy"] == result.best_metric
    assert result.history[0]["train_loss"] > result.history[-1]["train_loss"]


def test_only_trainable_params_change(make_model, task):
    model = make_model()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    fit(model, model.trainable(), task["train"], task["dev"], TrainConfig(max_epochs=2, **FAST))
    after = model.state_dict()
    for name in ("encoder.weight", "encoder.bias", "decoy"):
        assert torch.equal(before[name], after[name]), name
    for name in ("norm.weight", "norm.bias", "head.weight", "head.bias"):
        assert not torch.equal(before[name], after[name]), name


def test_early_stopping_stops_after_patience_and_restores_best(make_model, task):
    model = make_model()
    recorder = Recorder(model.trainable())
    config = TrainConfig(max_epochs=40, patience=2, **FAST)
    result = fit(model, model.trainable(), task["train"], task["dev"], config, callbacks=[recorder])
    assert result.stop_reason == "early_stopping" and result.stopped_early
    assert result.epochs_run == result.best_epoch + 2 < 40
    assert len(result.history) == len(recorder.reports) == result.epochs_run
    best = recorder.snapshots[result.best_epoch - 1]
    assert all(torch.equal(p, b) for p, b in zip(model.trainable(), best, strict=True))
    last = recorder.snapshots[-1]
    assert not all(torch.equal(p, b) for p, b in zip(model.trainable(), last, strict=True))
    assert evaluate(model, task["dev"], ["accuracy"])["accuracy"] == result.best_metric


def test_min_epochs_holds_early_stopping_off_until_then(make_model, task):
    config = TrainConfig(max_epochs=40, patience=1, **FAST)
    model = make_model()
    early = fit(model, model.trainable(), task["train"], task["dev"], config)
    assert early.stop_reason == "early_stopping" and early.epochs_run < 20
    held = replace(config, min_epochs=early.epochs_run + 3)
    model = make_model()
    result = fit(model, model.trainable(), task["train"], task["dev"], held)
    assert result.stop_reason == "early_stopping" and result.epochs_run >= early.epochs_run + 3
    assert result.history[: early.epochs_run] == early.history  # the same run, only longer
    assert result.history[-1]["epoch"] > result.best_epoch  # then patience ended it
    capped = replace(config, min_epochs=50)  # max_epochs still ends training
    model = make_model()
    assert fit(model, model.trainable(), task["train"], task["dev"], capped).epochs_run == 40


def test_callbacks_receive_every_epoch_and_the_result(make_model, task):
    model = make_model()
    recorder = Recorder(model.trainable())
    config = TrainConfig(max_epochs=3, metric="f1", **FAST)
    result = fit(model, model.trainable(), task["train"], task["dev"], config, callbacks=[recorder])
    assert [r.epoch for r in recorder.reports] == [1, 2, 3]
    assert recorder.results == [result] and result.stop_reason == "max_epochs"
    last = recorder.reports[-1]
    assert set(last.dev_metrics) == {"f1", "accuracy"} and last.metric == "f1"
    assert last.global_step == 3 * len(task["train"]) and last.examples_per_second > 0
    assert last.best_metric == max(r.dev_metrics["f1"] for r in recorder.reports)
    assert [r.is_best for r in recorder.reports].count(True) >= 1
    assert result.history[-1]["learning_rate"] == pytest.approx(0.0)  # linear decay ends at 0


def test_callback_returning_true_stops_training(make_model, task):
    model = make_model()
    recorder = Recorder(model.trainable(), stop_at=2)
    config = TrainConfig(max_epochs=5, **FAST)
    result = fit(model, model.trainable(), task["train"], task["dev"], config, callbacks=[recorder])
    assert result.epochs_run == 2 and result.stop_reason == "callback" and result.stopped_early
    assert recorder.results == [result]


def test_gradient_accumulation_matches_one_large_batch(make_model, task):
    def final_params(batch_size: int, accum: int) -> list[torch.Tensor]:
        model = make_model()
        recorder = Recorder(model.trainable())
        config = TrainConfig(max_epochs=2, grad_accum_steps=accum, learning_rate=0.01)
        batches = [b for i in range(0, 256, batch_size) for b in [_slice(task, i, batch_size)]]
        fit(model, model.trainable(), batches, task["dev"], config, callbacks=[recorder])
        return recorder.snapshots[-1]

    large, accumulated, small = final_params(32, 1), final_params(16, 2), final_params(16, 1)
    for a, b in zip(large, accumulated, strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    assert not all(torch.allclose(a, b, atol=1e-4) for a, b in zip(large, small, strict=True))


def _slice(task: dict, start: int, size: int) -> dict[str, torch.Tensor]:
    return {
        "x": task["x_train"][start : start + size],
        "labels": task["y_train"][start : start + size],
    }


def test_extra_loss_is_added_to_every_step(make_model, task):
    config = TrainConfig(max_epochs=2, grad_accum_steps=2, **FAST)
    plain = make_model()
    fit(plain, plain.trainable(), task["train"], task["dev"], config)
    model, calls = make_model(), []

    def l2_on_head() -> torch.Tensor:
        calls.append(1)
        return 0.5 * model.head.weight.pow(2).sum()

    fit(model, model.trainable(), task["train"], task["dev"], config, extra_loss=l2_on_head)
    assert len(calls) == 2 * len(task["train"])
    assert model.head.weight.norm() < plain.head.weight.norm()


def test_train_batches_callable_gets_each_epoch(make_model, task, shuffled_train):
    seen: list[int] = []

    def train(epoch: int):
        seen.append(epoch)
        return shuffled_train(epoch)

    model = make_model()
    fit(model, model.trainable(), train, task["dev"], TrainConfig(max_epochs=3, **FAST))
    assert seen == [1, 1, 2, 3]  # epoch 1 once more up front, to size the LR schedule


def test_config_seed_decides_the_run_whatever_the_rng_before(make_model, task, shuffled_train):
    def history(seed: int, outside_seed: int) -> list[dict[str, float]]:
        model = make_model(dropout=0.3)
        torch.manual_seed(outside_seed)
        config = TrainConfig(max_epochs=2, seed=seed, **FAST)
        return fit(model, model.trainable(), shuffled_train, task["dev"], config).history

    assert history(seed=7, outside_seed=1) == history(seed=7, outside_seed=2)
    assert history(seed=7, outside_seed=1) != history(seed=8, outside_seed=1)


def test_bad_inputs_are_refused_clearly(make_model, task):
    model, config = make_model(), TrainConfig(**FAST)
    with pytest.raises(ValueError, match="requires_grad=False"):
        fit(model, [model.encoder.weight], task["train"], task["dev"], config)
    with pytest.raises(ValueError, match="not a parameter of the model"):
        fit(model, [torch.nn.Parameter(torch.zeros(2))], task["train"], task["dev"], config)
    with pytest.raises(TypeError, match="re-iterable"):
        fit(model, model.trainable(), iter(task["train"]), task["dev"], config)
    with pytest.raises(ValueError, match="unknown metric"):
        fit(model, model.trainable(), task["train"], task["dev"], config, metric_names=["auc"])
