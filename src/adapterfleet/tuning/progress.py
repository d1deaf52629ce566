"""What the driver prints while a sweep runs: one line per trial epoch, from the results Tune
hands the driver's callback, with a running count of the trials (and whatever the caller adds,
e.g. the fusions waiting)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from adapterfleet.training.callbacks import epoch_line
from adapterfleet.tuning.spec import TrialParams

ENDED = ("TERMINATED", "ERROR")
Note = Callable[[], str]  # more of the pipeline's state, appended to each count ("" for none)


def trial_counts(statuses: Iterable[str], total: int) -> str:
    """`trials 1 done, 2 running, 1 pending` of `total` planned (Tune may not have created
    every trial yet: those it has not are pending)."""
    statuses = list(statuses)
    done = sum(s in ENDED for s in statuses)
    running = sum(s == "RUNNING" for s in statuses)
    pending = max(total, len(statuses)) - done - running
    return f"trials {done} done, {running} running, {pending} pending"


def trial_epoch_line(
    params: TrialParams,
    result: Mapping[str, Any],
    metric: str,
    max_epochs: int,
    counts: str,
) -> str | None:
    """The line of one epoch's result of a trial; None for a result that is not an epoch's
    (the trial's final report)."""
    needed = ("epoch", "train_loss", f"best_dev_{metric}", "best_epoch")
    if any(key not in result for key in needed):
        return None
    line = epoch_line(result, metric, max_epochs, f"trial {params.trial_id}")
    return f"{line} [{counts}]"


def with_note(counts: str, note: Note | None) -> str:
    extra = note() if note is not None else ""
    return f"{counts}; {extra}" if extra else counts
