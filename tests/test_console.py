"""The lines a run prints: an epoch in one line, the trial counts, durations, and the relay
that prints a Ray worker's marked lines plain and drops the rest at the default level."""

from __future__ import annotations

import pytest

from adapterfleet.console import Level, duration_text
from adapterfleet.orchestration.relay import END, WorkerRelay, WorkerSay
from adapterfleet.training.callbacks import epoch_line
from adapterfleet.tuning.progress import trial_counts


def test_an_epoch_is_one_line_with_the_best_so_far_and_its_time() -> None:
    values = {
        "epoch": 2,
        "train_loss": 0.43121,
        "dev_accuracy": 0.97,
        "dev_f1": 0.5,
        "best_dev_accuracy": 0.98,
        "best_epoch": 1,
        "epoch_seconds": 11.4,
        "config": {"task": "x"},  # what else a Tune result holds is left out
    }
    assert epoch_line(values, "accuracy", 10, "trial t-rf16") == (
        "trial t-rf16 epoch 2/10: train loss 0.4312, dev accuracy 0.9700, dev f1 0.5000 "
        "(best accuracy 0.9800 at epoch 1), 11 s"
    )


def test_trials_not_created_yet_count_as_pending() -> None:
    statuses = ["TERMINATED", "ERROR", "RUNNING", "PENDING"]
    assert trial_counts(statuses, 6) == "trials 2 done, 1 running, 3 pending"


@pytest.mark.parametrize(
    ("seconds", "text"), [(44.6, "45 s"), (112, "1 min 52 s"), (7500, "2 h 5 min")]
)
def test_durations_read_as_words(seconds: float, text: str) -> None:
    assert duration_text(seconds) == text


@pytest.mark.parametrize("level", [Level.QUIET, Level.DEFAULT])
def test_a_workers_own_lines_come_plain_and_the_rest_stays_in_its_log(
    level: Level, capsys: pytest.CaptureFixture[str]
) -> None:
    say = WorkerSay("fusion fruit")
    say("fusion fruit: epoch 1/2: train loss 0.5000")
    say(END)
    worker_stdout = capsys.readouterr().out.splitlines()
    noise = "2026/11/24 08:35:50 INFO mlflow.system_metrics.system_metrics_monitor: Started"
    shown: list[str] = []
    WorkerRelay(shown.append, level).handle({"lines": [*worker_stdout, noise], "pid": 7})
    assert shown == ["fusion fruit: epoch 1/2: train loss 0.5000"]
