"""`train_task` and `fuse_task` stopped by Ctrl-C (a KeyboardInterrupt after an epoch, as the
signal raises it): the finished epochs stay in `<out>.partial`, an earlier run at `out` stays
whole, and the same call continues after the newest epoch, training what an uninterrupted run
trains; a call with other settings starts afresh and says why."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from adapterfleet.config import ConfigError, PipelineConfig
from adapterfleet.orchestration.commands import fusion_training
from adapterfleet.orchestration.local import adapter_training, fuse_task, train_task
from adapterfleet.training import Callback

EPOCHS = {"max_epochs": 3, "batch_size": 16, "learning_rate": 0.01}


class _Epochs(Callback):
    """Records each epoch trained; Ctrl-C after epoch `stop_after`."""

    def __init__(self, stop_after: int | None = None) -> None:
        self.stop_after, self.seen = stop_after, []

    def on_epoch_end(self, report) -> None:
        self.seen.append(report.epoch)
        if report.epoch == self.stop_after:
            raise KeyboardInterrupt


def _train(config: PipelineConfig, out: Path, epochs: _Epochs, said: list[str], **changes):
    training = adapter_training(config, "fruit", **{**EPOCHS, **changes})
    return train_task(
        config, "fruit", "st-a", out, train_config=training, callbacks=[epochs], say=said.append
    )


def test_a_train_with_other_settings_starts_afresh_and_says_why(config, tmp_path) -> None:
    out, said = tmp_path / "run", []
    with pytest.raises(KeyboardInterrupt):
        _train(config, out, _Epochs(stop_after=1), said)
    assert (tmp_path / "run.partial" / "checkpoints" / "epoch-0001").is_dir()

    epochs = _Epochs()
    run = _train(config, out, epochs, said, learning_rate=0.02)
    said[:] = [line for line in said if not line.startswith("warning: ")]  # if it learned none
    assert said == [
        f"starting afresh: the epochs kept in {tmp_path / 'run.partial'} were trained with other "
        "settings (learning_rate 0.01, now 0.02); they are replaced"
    ]
    assert epochs.seen == [1, 2, 3]
    assert run.fit.epochs_run == 3
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]


def _two_adapters(config, tmp_path: Path) -> list[Path]:
    """fruit's and water's ST-A adapters, one epoch each, for a fusion over them."""
    for task in ("fruit", "water"):
        training = adapter_training(config, task, max_epochs=1, batch_size=16)
        train_task(config, task, "st-a", tmp_path / task, train_config=training)
    return [tmp_path / task / "adapter" for task in ("fruit", "water")]


def test_a_stopped_fuse_keeps_the_earlier_run_and_continues_as_if_never_stopped(
    config, tmp_path
) -> None:
    adapters = _two_adapters(config, tmp_path)
    out, partial, said = tmp_path / "fusion", tmp_path / "fusion.partial", []

    def fuse(to: Path, epochs: _Epochs, **changes):
        train = fusion_training(config, "fruit", **{**EPOCHS, **changes})
        return fuse_task(config, "fruit", adapters, to, train_config=train,
                         callbacks=[epochs], say=said.append)  # fmt: skip

    fuse(out, _Epochs(), max_epochs=1)  # the earlier run at --out
    earlier = (out / "run.json").read_bytes()
    with pytest.raises(KeyboardInterrupt):
        fuse(out, _Epochs(stop_after=2))
    assert (out / "run.json").read_bytes() == earlier
    assert sorted(p.name for p in (partial / "checkpoints").iterdir()) == ["epoch-0002"]

    epochs = _Epochs()
    resumed = fuse(out, epochs)
    replacing = [line for line in said if line.startswith(f"--out {out} holds an earlier run (")]
    assert len(replacing) == 2, said  # the stopped call's and the resumed one's, before training
    kept = [line for line in said if line not in replacing and not line.startswith("warning: ")]
    assert kept == [f"resuming from epoch 3 of 3 (checkpoint in {partial})"]
    assert epochs.seen == [3]
    assert not partial.exists()
    assert (out / "run.json").read_bytes() != earlier
    whole = fuse(tmp_path / "whole", _Epochs())
    assert resumed.fit.history == [pytest.approx(epoch) for epoch in whole.fit.history]
    assert resumed.dev_metrics == pytest.approx(whole.dev_metrics)


def test_a_fuse_with_the_out_of_a_running_one_is_refused_and_leaves_its_epochs(
    config, tmp_path
) -> None:
    """It started afresh, replacing the running fusion's kept epochs, and both saved a run."""
    adapters = _two_adapters(config, tmp_path)
    out, partial, refusals = tmp_path / "dup2", tmp_path / "dup2.partial", []

    def fuse(epochs: Callback, **changes):
        train = fusion_training(config, "fruit", **{**EPOCHS, **changes})
        return fuse_task(config, "fruit", adapters, out, train_config=train, callbacks=[epochs])

    class _SecondFuse(Callback):
        def on_epoch_end(self, report) -> None:
            if report.epoch == 1:
                with pytest.raises(ConfigError) as refused:
                    fuse(_Epochs(), learning_rate=0.02)
                refusals.append(str(refused.value))
                assert (partial / "checkpoints" / "epoch-0001").is_dir()

    run = fuse(_SecondFuse())
    assert refusals == [
        f"--out {out}: another adapterfleet train or fuse is writing this run folder (pid "
        f"{os.getpid()}); wait for it to end, or give another --out"
    ]
    assert run.fit.epochs_run == 3
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dup2", "fruit", "water"]
