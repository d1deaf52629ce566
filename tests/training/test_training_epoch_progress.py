"""Lines within a long epoch (`Callback.on_progress`, `EpochLog`): at most one per interval
(`ADAPTERFLEET_PROGRESS_S` here a fraction of a second), none in an epoch shorter than it."""

from __future__ import annotations

import re
import time

import pytest
import torch
from tiny_classifier import TinyClassifier, separable_data, to_batches

from adapterfleet.training import TrainConfig, fit
from adapterfleet.training.callbacks import (
    PROGRESS_ENV,
    PROGRESS_S,
    EpochLog,
    ProgressReport,
    progress_line,
)

FAST = {"learning_rate": 0.05, "max_grad_norm": None, "device": "cpu"}
STEP_S = 0.02  # each training forward of `SlowClassifier` takes this long at least
LINE = re.compile(
    r"^fusion rte \(rte-rf16\) epoch (\d)/2: ([\d,]+) of 120 rows \((\d+)%\), "
    r"\d+ s so far, about \d+ s left$"
)


class SlowClassifier(TinyClassifier):
    """The tiny classifier, made as slow per training batch as a real model on a CPU."""

    def forward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        if self.training:
            time.sleep(STEP_S)
        return super().forward(batch)


def slow_task(rows: int = 120, batch_size: int = 8) -> tuple[list, list]:
    x, y = separable_data(rows, seed=0)
    dev_x, dev_y = separable_data(40, seed=1)
    return to_batches(x, y, batch_size), to_batches(dev_x, dev_y, 20)


def test_a_long_epoch_says_where_it_is_and_how_long_is_left(monkeypatch):
    monkeypatch.setenv(PROGRESS_ENV, "0.1")
    train, dev = slow_task()  # 15 batches of 8 rows, 0.3 s an epoch at least
    lines: list[str] = []
    config = TrainConfig(max_epochs=2, grad_accum_steps=2, **FAST)
    model = SlowClassifier()
    log = EpochLog(lines.append, config.max_epochs, "fusion rte (rte-rf16)")
    fit(model, model.trainable(), train, dev, config, callbacks=[log])
    within = [LINE.match(line) for line in lines if " rows " in line]
    assert all(within) and len(within) >= 2 * 2, lines
    for epoch in (1, 2):
        rows = [int(m[2].replace(",", "")) for m in within if m[1] == str(epoch)]
        assert rows == sorted(set(rows)) and rows, (epoch, lines)  # at most one line a batch
        # every batch's rows counted, across the grad accumulation's micro-batches
        assert all(r % 8 == 0 and 0 < r < 120 for r in rows), rows
    assert all(int(m[3]) == round(int(m[2].replace(",", "")) / 120 * 100) for m in within)
    ends = [i for i, line in enumerate(lines) if "train loss" in line]
    assert len(ends) == 2 and ends[-1] == len(lines) - 1, lines
    assert all(LINE.match(line)[1] == "1" for line in lines[: ends[0]]), lines
    assert all(LINE.match(line)[1] == "2" for line in lines[ends[0] + 1 : ends[1]]), lines


def test_a_short_epoch_says_only_its_epoch_line(monkeypatch):
    monkeypatch.delenv(PROGRESS_ENV, raising=False)
    train, dev = slow_task(rows=24)  # 3 batches: well under a minute
    lines: list[str] = []
    model = SlowClassifier()
    config = TrainConfig(max_epochs=2, **FAST)
    fit(model, model.trainable(), train, dev, config, callbacks=[EpochLog(lines.append, 2)])
    assert PROGRESS_S == 60.0
    assert len(lines) == 2 and all(line.startswith("epoch ") for line in lines), lines
    assert all("train loss" in line for line in lines)


def test_batches_of_unknown_count_say_the_rows_done_and_the_time(monkeypatch):
    monkeypatch.setenv(PROGRESS_ENV, "0.05")
    train, dev = slow_task(rows=64)
    lines: list[str] = []
    model = SlowClassifier()
    config = TrainConfig(max_epochs=1, **FAST)
    log = EpochLog(lines.append, 1)
    fit(model, model.trainable(), lambda epoch: iter(train), dev, config, callbacks=[log])
    within = [line for line in lines if " rows" in line]
    assert within and all(re.match(r"^epoch 1/1: [\d,]+ rows, \d+ s so far$", x) for x in within)


def test_progress_line_words():
    report = ProgressReport(1, 12_032, 67_349, 376, 2_105, 240.0)
    line = progress_line(report, 30, "trial rte-rf16-lr0.0001-s0")
    assert line == (
        "trial rte-rf16-lr0.0001-s0 epoch 1/30: 12,032 of 67,349 rows (18%), 4 min so far, "
        "about 18 min left"
    )
    by_batches = ProgressReport(2, 640, None, 20, 80, 4000.0)
    assert progress_line(by_batches) == (
        "epoch 2: 640 rows, 20 of 80 batches (25%), 1 h 7 min so far, about 3 h 20 min left"
    )


def test_a_bad_interval_is_refused_naming_the_variable(monkeypatch):
    from adapterfleet.errors import UserError

    monkeypatch.setenv(PROGRESS_ENV, "soon")
    train, dev = slow_task(rows=8)
    model = SlowClassifier()
    with pytest.raises(UserError, match=PROGRESS_ENV):
        fit(
            model,
            model.trainable(),
            train,
            dev,
            TrainConfig(max_epochs=1, **FAST),
            callbacks=[EpochLog(print, 1)],
        )
