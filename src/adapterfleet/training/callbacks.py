"""What `fit` tells the outside world: per-epoch reports, the final result, the callback hooks.

Tuning and tracking plug in here (a callback that reports to Ray Tune, one that logs to MLflow)
without this package importing either.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from adapterfleet.console import Say, plural
from adapterfleet.errors import UserError

# Seconds between `Callback.on_progress` calls while an epoch trains (an epoch shorter than that
# gets none); the environment's ADAPTERFLEET_PROGRESS_S sets another (the tests': a fraction).
PROGRESS_S = 60.0
PROGRESS_ENV = "ADAPTERFLEET_PROGRESS_S"


def progress_interval() -> float:
    """`PROGRESS_S`, or the seconds $ADAPTERFLEET_PROGRESS_S gives (read at each `fit`)."""
    given = os.environ.get(PROGRESS_ENV, "").strip()
    try:
        return float(given) if given else PROGRESS_S
    except ValueError:
        raise UserError(f"{PROGRESS_ENV}: a number of seconds, got {given!r}") from None


@dataclass(frozen=True)
class EpochReport:
    """The state of the loop after one epoch's training and dev evaluation."""

    epoch: int  # 1-based
    global_step: int  # optimizer steps so far
    train_loss: float  # mean training loss of the epoch (extra_loss included)
    learning_rate: float  # LR of the first parameter group after the epoch's last step
    dev_metrics: dict[str, float]
    metric: str  # the name of the metric early stopping and model selection use
    best_metric: float  # best value of `metric` so far (this epoch included)
    best_epoch: int
    is_best: bool  # this epoch set `best_metric`
    epoch_seconds: float  # wall time of this epoch (training + evaluation)
    elapsed_seconds: float  # wall time of the whole fit so far, across resumes
    examples_per_second: float  # training throughput of this epoch
    _saver: Callable[[Path], Path] = field(repr=False, compare=False)
    cuda_graph_replays: int | None = None  # this epoch's steps replayed (cuda_graphs), else None
    cuda_graphs_fallback: str | None = None  # why steps went back to eager (cuda_graphs), if so

    def save_checkpoint(self, directory: str | Path) -> Path:
        """Write a resumable checkpoint of the loop as of the end of this epoch into `directory`.

        Pass the same directory to `fit(..., resume_from=directory)` to continue with the next
        epoch. Returns the directory.
        """
        return self._saver(Path(directory))


@dataclass(frozen=True)
class ProgressReport:
    """Where an epoch's training is, while it runs (`Callback.on_progress`)."""

    epoch: int  # 1-based
    rows_done: int  # training examples of the epoch done so far (every rank's)
    rows_total: int | None  # the epoch's examples; None where its batches do not say
    batches_done: int
    batches_total: int | None  # None for batches without a len()
    seconds: float  # since the epoch started

    @property
    def fraction(self) -> float | None:
        """The share of the epoch done: by rows where their total is known, else by batches."""
        if self.rows_total:
            return self.rows_done / self.rows_total
        if self.batches_total:
            return self.batches_done / self.batches_total
        return None


@dataclass(frozen=True)
class FitResult:
    """The outcome of `fit`; the model holds the best trainable state when it returns."""

    best_metric: float
    best_epoch: int
    best_metrics: dict[str, float]  # every dev metric at the best epoch
    epochs_run: int  # last completed epoch, counting epochs done before a resume
    history: list[dict[str, float]]  # one flat dict per epoch: epoch, train_loss, dev_<name>, ...
    stopped_early: bool  # stopped before max_epochs (patience ran out or a callback asked)
    stop_reason: str  # "max_epochs", "early_stopping" or "callback"
    train_seconds: float  # wall time across resumes
    examples_per_second: float  # training examples per second of wall time

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of the result."""
        return {
            "best_metric": self.best_metric,
            "best_epoch": self.best_epoch,
            "best_metrics": dict(self.best_metrics),
            "epochs_run": self.epochs_run,
            "history": [dict(h) for h in self.history],
            "stopped_early": self.stopped_early,
            "stop_reason": self.stop_reason,
            "train_seconds": self.train_seconds,
            "examples_per_second": self.examples_per_second,
        }


class Callback:
    """Hooks called by `fit`. Subclass and override what you need; the defaults do nothing.

    To stop training, return True from `on_epoch_end`: the loop finishes that epoch's callbacks,
    then stops (the best state is still restored and `on_fit_end` still runs). Any other return
    value (None, False) lets training continue. Callbacks may call `report.save_checkpoint(dir)`.
    """

    def on_train_start(self) -> None:
        """Called once, just before the first training step (model, data and optimizer are
        ready; after a resume, before the first step of the next epoch)."""
        return None

    def on_progress(self, report: ProgressReport) -> None:
        """Called while an epoch trains, at most once per `loop.progress_interval()` (a minute;
        never in an epoch shorter than that), on rank 0 only, and not while a progress bar
        shows (`TrainConfig.progress` on a terminal)."""
        return None

    def on_epoch_end(self, report: EpochReport) -> bool | None:
        """Called after every epoch's evaluation; return True to request a stop."""
        return None

    def on_fit_end(self, result: FitResult) -> None:
        """Called once, after the best state has been restored into the model."""
        return None


class ProgressClock:
    """Calls the callbacks' `on_progress` at most every `every_s` while one epoch trains:
    `tick` after each batch reads the clock once, and says nothing before `every_s` is out."""

    def __init__(
        self,
        epoch: int,
        rows_total: int | None,
        batches_total: int | None,
        every_s: float,
        callbacks: Sequence[Callback],
    ) -> None:
        self.epoch, self.rows_total, self.batches_total = epoch, rows_total, batches_total
        self.every_s, self.callbacks = every_s, callbacks
        self.started = time.monotonic()
        self.due = self.started + every_s

    def tick(self, rows_done: int, batches_done: int) -> None:
        now = time.monotonic()
        if now < self.due or batches_done == self.batches_total:  # the epoch line comes next
            return
        self.due = now + self.every_s
        report = ProgressReport(
            self.epoch, rows_done, self.rows_total, batches_done, self.batches_total,
            now - self.started,
        )  # fmt: skip
        for callback in self.callbacks:
            callback.on_progress(report)


def epoch_values(report: EpochReport) -> dict[str, float]:
    """An epoch as the flat values a Tune trial reports: epoch, train_loss, dev_<name>...,
    best_dev_<metric>, best_epoch, epoch_seconds."""
    return {
        "epoch": report.epoch,
        "train_loss": report.train_loss,
        **{f"dev_{k}": v for k, v in report.dev_metrics.items()},
        f"best_dev_{report.metric}": report.best_metric,
        "best_epoch": report.best_epoch,
        "epoch_seconds": report.epoch_seconds,
    }


def epoch_line(
    values: Mapping[str, Any], metric: str, max_epochs: int | None = None, label: str = ""
) -> str:
    """One epoch in one line, from `epoch_values`: `[label ]epoch 2/10: train loss 0.4312,
    dev accuracy 0.9700 (best accuracy 0.9700 at epoch 2), 11 s`."""
    of = f"/{max_epochs}" if max_epochs else ""
    dev = ", ".join(f"dev {k[4:]} {v:.4f}" for k, v in values.items() if k.startswith("dev_"))
    seconds = values.get("epoch_seconds")
    return (
        f"{label + ' ' if label else ''}epoch {int(values['epoch'])}{of}: train loss "
        f"{values['train_loss']:.4f}, {dev} (best {metric} {values[f'best_dev_{metric}']:.4f} "
        f"at epoch {int(values['best_epoch'])})"
        + (f", {seconds:.0f} s" if seconds is not None else "")
    )


def rough_duration(seconds: float) -> str:
    """`45 s`, `4 min`, `2 h 5 min`: a time to the minute (an estimate's precision)."""
    if seconds < 60:
        return f"{round(seconds)} s"
    minutes = round(seconds / 60)
    return f"{minutes} min" if minutes < 60 else f"{minutes // 60} h {minutes % 60} min"


def progress_line(report: ProgressReport, max_epochs: int | None = None, label: str = "") -> str:
    """Where an epoch is: `[label ]epoch 1/30: 12,032 of 67,349 rows (18%), 4 min so far, about
    18 min left` (`12,032 rows, 150 of 560 batches (27%), ...` where the rows' total is not
    known)."""
    of = f"/{max_epochs}" if max_epochs else ""
    rows = f"{report.rows_done:,}"
    if report.rows_total:
        rows += f" of {report.rows_total:,} {plural(report.rows_total, 'row', bare=True)}"
    else:
        rows += f" {plural(report.rows_done, 'row', bare=True)}"
        if report.batches_total:
            rows += f", {report.batches_done:,} of {report.batches_total:,} batches"
    line = f"{label + ' ' if label else ''}epoch {report.epoch}{of}: {rows}"
    done = report.fraction
    if done is not None:
        line += f" ({done:.0%})"
    line += f", {rough_duration(report.seconds)} so far"
    if done:
        line += f", about {rough_duration(report.seconds * (1 - done) / done)} left"
    return line


class ProgressLog(Callback):
    """A line through `say` while a long epoch trains (`progress_line`, after `label`, what
    trains): at most one a minute, none in a shorter epoch."""

    def __init__(self, say: Say, max_epochs: int | None = None, label: str = "") -> None:
        self.say = say
        self.max_epochs = max_epochs
        self.label = label

    def on_progress(self, report: ProgressReport) -> None:
        self.say(progress_line(report, self.max_epochs, self.label))


class EpochLog(ProgressLog):
    """One line per epoch through `say`: training loss, dev metrics, the best so far and the
    epoch's time, after `label` (what trains) when given; and within an epoch longer than a
    minute, where it is (`ProgressLog`). It shows progress where no progress bar can (a log
    file, a pipe, `nohup`, a Ray worker whose lines the driver relays)."""

    def on_epoch_end(self, report: EpochReport) -> bool | None:
        self.say(epoch_line(epoch_values(report), report.metric, self.max_epochs, self.label))
        return None
