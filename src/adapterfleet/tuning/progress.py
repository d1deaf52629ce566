"""What the driver prints while a sweep runs: one line per trial epoch, from the results Tune
hands the driver's callback, with a running count of the trials (and whatever the caller adds,
e.g. the fusions waiting)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from adapterfleet.console import Say, duration_text, plural
from adapterfleet.errors import cause_text
from adapterfleet.training.callbacks import epoch_line
from adapterfleet.tuning.outcomes import is_divergence
from adapterfleet.tuning.spec import TrialParams

ENDED = ("TERMINATED", "ERROR")
if TYPE_CHECKING:
    from adapterfleet.config import PipelineConfig

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


STALL_NOTE_S = 60.0  # trials pending, none running, this long: the sweep says why


@dataclass
class Stall:
    """Whether trials have been pending with none running for `after_s` (the cluster's CPUs or
    GPUs held by other jobs: the log said nothing for minutes); `due` once per such stall."""

    after_s: float = STALL_NOTE_S
    since: float | None = None
    said: bool = False

    def due(self, statuses: Iterable[str], now: float) -> bool:
        statuses = list(statuses)
        if "PENDING" not in statuses or "RUNNING" in statuses:
            self.since, self.said = None, False
            return False
        if self.since is None:
            self.since = now
        if self.said or now - self.since < self.after_s:
            return False
        self.said = True
        return True


PLACEMENT_CHECK_S = 5.0  # how often the trials' step asks Ray for its placement groups
_placement: dict[str, float | bool] = {"at": float("-inf"), "pending": False}


def note_stall(stall: Stall, trials: Sequence[Any], config: PipelineConfig, say: Say) -> None:
    """Trials that have waited `stall.after_s` for resources with none running: a line says
    what each asks and what the cluster has free, once per stall."""
    statuses = waiting_statuses(trials, config.resources.distributed)
    if not stall.due(statuses, time.monotonic()):
        return
    try:
        free = free_resources(gpus=bool(config.resources.gpu))
        pending = statuses.count("PENDING")
        say(stall_line(pending, resources_asked(config), free, stall.after_s))
    except Exception as error:  # noqa: BLE001 - a progress line never stops the sweep
        say(f"(trials wait for resources; the cluster did not say: {error})")


def waiting_statuses(trials: Sequence[Any], distributed: bool) -> list[str]:
    """Each trial's Tune status; with trials of several workers (`distributed`), one that runs
    but has reported nothing while a placement group waits for its resources as PENDING. Tune
    starts such a trial's driver at once (it reserves no CPU), so a trial whose workers waited
    for CPUs held by other jobs waited minutes without a word."""
    statuses = [str(trial.status) for trial in trials]
    quiet = [i for i, s in enumerate(statuses) if s == "RUNNING" and not trials[i].last_result]
    try:
        waiting = distributed and bool(quiet) and placement_pending()
    except Exception:  # noqa: BLE001 - Ray gone: the statuses as Tune has them
        waiting = False
    if not waiting:
        return statuses
    return ["PENDING" if i in quiet else s for i, s in enumerate(statuses)]


def placement_pending(now: float | None = None) -> bool:
    """Whether a placement group of the cluster waits for resources (asked at most every
    `PLACEMENT_CHECK_S`)."""
    import ray.util

    now = time.monotonic() if now is None else now
    if now - float(_placement["at"]) >= PLACEMENT_CHECK_S:
        table = ray.util.placement_group_table().values()
        _placement["pending"] = any(group.get("state") == "PENDING" for group in table)
        _placement["at"] = now
    return bool(_placement["pending"])


def stall_line(pending: int, asks: str, free: str, waited_s: float) -> str:
    """`2 trials have waited 1 min 0 s for resources: each asks cpu 1; the cluster has 0 of 2
    CPUs free; ...`."""
    have = "has" if pending == 1 else "have"
    return (
        f"{plural(pending, 'trial')} {have} waited {duration_text(waited_s)} for resources: each "
        f"asks {asks}; the cluster has {free} free; they start once it has what one asks (other "
        "jobs may hold the rest, or an autoscaler may still be adding nodes)"
    )


def resources_asked(config: PipelineConfig) -> str:
    """What a trial asks Ray for: `cpu 1`, `cpu 1, gpu 0.25`, `2 workers of cpu 4, gpu 1`."""
    res = config.resources
    each = f"cpu {res.cpu:g}" + (f", gpu {res.gpu:g}" if res.gpu else "")
    return f"{res.workers} workers of {each}" if res.distributed else each


def free_resources(gpus: bool = False) -> str:
    """`0 of 2 CPUs` (`, 0 of 1 GPUs` on a cluster with GPUs, or with `gpus`), from Ray."""
    import ray

    free, total = ray.available_resources(), ray.cluster_resources()
    kinds = [("CPU", "CPUs"), *([("GPU", "GPUs")] if gpus or total.get("GPU") else [])]
    return ", ".join(f"{free.get(k, 0.0):g} of {total.get(k, 0.0):g} {name}" for k, name in kinds)


def retry_line(trial_id: str, error: BaseException | None) -> str | None:
    """`trial t1: failed (<cause>), retrying from its last checkpoint`; None for a trial that
    diverged, whose retries fail at once (tuning/trial.py) and whose FAILED line says why."""
    if is_divergence(error):
        return None
    cause = cause_text(error) if error is not None else ""
    failed = f"failed ({cause})" if cause else "failed"
    return f"trial {trial_id}: {failed}, retrying from its last checkpoint"
