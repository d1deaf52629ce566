"""Resumable checkpoints: layout on disk (no pickle) and stop-then-resume equals one run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from adapterfleet.training import Callback, EpochReport, TrainConfig, fit

# Dropout, warm-up, accumulation and weight decay: every piece of state a resume must restore.
CONFIG = TrainConfig(
    learning_rate=0.02, max_epochs=5, warmup_ratio=0.2, weight_decay=0.01, grad_accum_steps=2,
    max_grad_norm=1.0, seed=3, device="cpu",
)  # fmt: skip


class Checkpointer(Callback):
    """Saves a checkpoint after every epoch into `root/epoch-<n>`; may stop after `stop_at`."""

    def __init__(self, root: Path, stop_at: int | None = None) -> None:
        self.root, self.stop_at, self.epochs = root, stop_at, []
        self.reports: list[EpochReport] = []

    def on_epoch_end(self, report: EpochReport) -> bool:
        self.epochs.append(report.epoch)
        self.reports.append(report)
        report.save_checkpoint(self.root / f"epoch-{report.epoch}")
        torch.rand(3)  # a callback drawing random numbers must not change training
        return report.epoch == self.stop_at


def test_stop_and_resume_equals_an_uninterrupted_run(make_model, task, shuffled_train, tmp_path):
    full_model = make_model(dropout=0.2)
    full = fit(full_model, full_model.trainable(), shuffled_train, task["dev"], CONFIG)

    first = make_model(dropout=0.2)
    stopper = Checkpointer(tmp_path, stop_at=2)
    cut = fit(first, first.trainable(), shuffled_train, task["dev"], CONFIG, callbacks=[stopper])
    assert cut.epochs_run == 2 and cut.stop_reason == "callback"

    resumed_model, after = make_model(dropout=0.2), Checkpointer(tmp_path / "after")
    resumed = fit(
        resumed_model, resumed_model.trainable(), shuffled_train, task["dev"], CONFIG,
        callbacks=[after], resume_from=tmp_path / "epoch-2",
    )  # fmt: skip
    assert after.epochs == [3, 4, 5]  # no epoch before the checkpoint is retrained
    assert resumed_model.train_forwards == 3 * len(task["train"])
    assert [h["epoch"] for h in resumed.history] == [1, 2, 3, 4, 5]
    for got, want in zip(resumed.history, full.history, strict=True):
        assert got == pytest.approx(want, rel=1e-6, abs=1e-7)
    assert (resumed.best_epoch, resumed.best_metric) == (full.best_epoch, full.best_metric)
    pairs = zip(resumed_model.state_dict().values(), full_model.state_dict().values(), strict=True)
    for got, want in pairs:
        torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-7)


def test_checkpoint_layout_is_json_and_safetensors(make_model, task, tmp_path):
    model = make_model()
    config = TrainConfig(max_epochs=2, device="cpu", learning_rate=0.05)
    fit(model, model.trainable(), task["train"], task["dev"], config,
        callbacks=[Checkpointer(tmp_path)])  # fmt: skip
    directory = tmp_path / "epoch-2"
    assert sorted(p.name for p in directory.iterdir()) == [
        "best.safetensors", "optimizer.safetensors", "rng.safetensors",
        "trainable.safetensors", "trainer_state.json",
    ]  # fmt: skip
    state = json.loads((directory / "trainer_state.json").read_text())
    assert state["epoch"] == 2 and state["global_step"] == state["scheduler_last_epoch"] == 32
    assert len(state["history"]) == 2 and state["config"] == config.to_dict()
    assert {"best_metric", "best_epoch", "epochs_without_improvement"} <= set(state)
    assert len(state["python_random_state"][1]) == 625
    trainable = load_file(directory / "trainable.safetensors")
    assert sorted(trainable) == ["0", "1", "2", "3"]
    assert torch.equal(trainable["2"], model.trainable()[2]) or state["best_epoch"] != 2
    optimizer = load_file(directory / "optimizer.safetensors")
    assert {"exp_avg.0", "exp_avg_sq.0", "step.0", "exp_avg.3"} <= set(optimizer)
    assert load_file(directory / "rng.safetensors")["torch_cpu"].dtype == torch.uint8


def test_resuming_a_finished_early_stopped_run_trains_nothing(make_model, task, tmp_path):
    config = TrainConfig(max_epochs=40, patience=1, device="cpu", learning_rate=0.05)
    model = make_model()
    saver = Checkpointer(tmp_path)
    done = fit(model, model.trainable(), task["train"], task["dev"], config, callbacks=[saver])
    assert done.stop_reason == "early_stopping"
    again_model, again_saver = make_model(), Checkpointer(tmp_path / "again")
    again = fit(
        again_model, again_model.trainable(), task["train"], task["dev"], config,
        callbacks=[again_saver], resume_from=tmp_path / f"epoch-{done.epochs_run}",
    )  # fmt: skip
    assert again_saver.epochs == [] and again_model.train_forwards == 0
    assert again.stop_reason == "early_stopping" and again.history == done.history
    for got, want in zip(again_model.trainable(), model.trainable(), strict=True):
        assert torch.equal(got, want)


def test_resume_refuses_other_config_or_shapes(make_model, task, tmp_path):
    model = make_model()
    config = TrainConfig(max_epochs=1, device="cpu")
    fit(model, model.trainable(), task["train"], task["dev"], config,
        callbacks=[Checkpointer(tmp_path)])  # fmt: skip
    other = TrainConfig(max_epochs=1, device="cpu", learning_rate=0.5, progress=True)
    with pytest.raises(ValueError, match=r"config differs .* \['learning_rate'\]"):
        fit(model, model.trainable(), task["train"], task["dev"], other,
            resume_from=tmp_path / "epoch-1")  # fmt: skip
    bigger = make_model(hidden=16)
    with pytest.raises(ValueError, match="tensor 0 has shape"):
        fit(bigger, bigger.trainable(), task["train"], task["dev"], config,
            resume_from=tmp_path / "epoch-1")  # fmt: skip
    with pytest.raises(FileNotFoundError, match="trainer_state.json"):
        fit(model, model.trainable(), task["train"], task["dev"], config, resume_from=tmp_path)


def test_a_checkpoint_from_before_min_epochs_existed_resumes(make_model, task, tmp_path):
    model = make_model()
    config = TrainConfig(max_epochs=2, device="cpu", learning_rate=0.05)
    saver = Checkpointer(tmp_path, stop_at=1)
    fit(model, model.trainable(), task["train"], task["dev"], config, callbacks=[saver])
    state_file = tmp_path / "epoch-1" / "trainer_state.json"
    state = json.loads(state_file.read_text())
    del state["config"]["min_epochs"]  # as written by a version without the field
    state_file.write_text(json.dumps(state))
    resumed = fit(model, model.trainable(), task["train"], task["dev"], config,
                  resume_from=tmp_path / "epoch-1")  # fmt: skip
    assert resumed.epochs_run == 2
    later = TrainConfig(max_epochs=2, device="cpu", learning_rate=0.05, min_epochs=2)
    with pytest.raises(ValueError, match=r"config differs .* \['min_epochs'\]"):
        fit(model, model.trainable(), task["train"], task["dev"], later,
            resume_from=tmp_path / "epoch-1")  # fmt: skip


def test_report_cannot_save_after_its_epoch(make_model, task, tmp_path):
    model, saver = make_model(), Checkpointer(tmp_path)
    fit(model, model.trainable(), task["train"], task["dev"], TrainConfig(max_epochs=2),
        callbacks=[saver])  # fmt: skip
    with pytest.raises(RuntimeError, match="during on_epoch_end"):
        saver.reports[-1].save_checkpoint(tmp_path / "late")
