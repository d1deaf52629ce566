"""The lifecycle every training job shares (a Tune trial, a fusion, a baseline): per-epoch
checkpoints and metrics, resume after the newest finished epoch, and ending its run.

The job hands the fit loop an `EpochRecorder` over its `JobWorkdir` and an `EpochSink` (where the
metrics go: the MLflow run in `registry/`, a list in the tests). At every epoch end it

    1. writes the loop checkpoint into the work folder,
    2. logs the epoch's metrics (`train_loss`, `learning_rate`, `dev_<name>`) at step = epoch
       (and once, as a tag, why its CUDA graph steps went back to eager ones, if they did),
    3. calls the job's hook (a trial reports to Tune there),
    4. deletes the older checkpoints.

The order makes a job that dies at any point resumable with each epoch logged once: a checkpoint
whose epoch never reached the sink is re-logged by `resume_job` before training continues. No ray,
no mlflow here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Protocol, runtime_checkable

from adapterfleet.console import Say
from adapterfleet.disk import is_disk_full
from adapterfleet.training.callbacks import Callback, EpochReport
from adapterfleet.training.workdir import JobWorkdir, checkpoint_epoch, checkpoint_history

# The job's own step after the metrics are logged: (report, the metrics logged, checkpoint folder).
EpochHook = Callable[[EpochReport, dict[str, float], Path], None]
# The metric whose logged steps tell which epochs reached the sink.
EPOCH_KEY = "train_loss"
# The run's tag saying why its steps went back from CUDA graphs to eager ones (`cuda_graphs`).
TAG_CUDA_GRAPHS = "adapterfleet.cuda_graphs"


@runtime_checkable
class EpochSink(Protocol):
    """Where a job's metrics go, and its run's end."""

    @property
    def run_id(self) -> str:
        """Names the run in messages (and, for a trial, in its Tune results)."""
        ...

    def log_metrics(self, metrics: Mapping[str, float], step: int | None = None) -> None: ...

    def logged_steps(self, key: str) -> set[int]:
        """The steps at which metric `key` was logged."""
        ...

    def set_tags(self, tags: Mapping[str, str]) -> None:
        """Set tags on the run (a note for whoever watches it)."""
        ...

    def end(self, status: str) -> None:
        """End the run: "FINISHED", "FAILED" or "KILLED"."""
        ...


def epoch_metrics(report: EpochReport) -> dict[str, float]:
    """What is logged per epoch (step = epoch): loss, learning rate, `dev_<metric>`, and with
    `cuda_graphs` the steps replayed as CUDA graphs (0 for an epoch that fell back to eager)."""
    replays = report.cuda_graph_replays
    return {
        "train_loss": report.train_loss,
        "learning_rate": report.learning_rate,
        **{f"dev_{k}": v for k, v in report.dev_metrics.items()},
        **({} if replays is None else {"cuda_graph_replays": float(replays)}),
    }


def history_metrics(entry: Mapping[str, float]) -> dict[str, float]:
    """The metrics of one checkpoint history entry as logged per epoch (all but `epoch`)."""
    return {k: float(v) for k, v in entry.items() if k != "epoch"}


class EpochRecorder(Callback):
    """Checkpoint, then the sink, then the job's hook, then prune, at every epoch end."""

    def __init__(self, workdir: JobWorkdir, sink: EpochSink, hook: EpochHook | None = None) -> None:
        self.workdir, self.sink, self.hook = workdir, sink, hook
        self.fallback_said = False  # the run's cuda_graphs tag is set once

    def on_epoch_end(self, report: EpochReport) -> None:
        folder = report.save_checkpoint(self.workdir.checkpoint_dir(report.epoch))
        metrics = epoch_metrics(report)
        # Logged for every epoch trained, so an epoch trained twice would show twice.
        self.sink.log_metrics(metrics, step=report.epoch)
        if report.cuda_graphs_fallback and not self.fallback_said:
            # the warning stays in the trial's log; the run in the MLflow UI says it too
            reason = f"eager from epoch {report.epoch}: {report.cuda_graphs_fallback}"
            self.sink.set_tags({TAG_CUDA_GRAPHS: reason})
            self.fallback_said = True
        if self.hook is not None:
            self.hook(report, metrics, folder)
        self.workdir.prune_checkpoints(keep_epoch=report.epoch)


def resume_job(
    workdir: JobWorkdir, sink: EpochSink, offered: Path | None = None
) -> tuple[int, Path] | None:
    """(epoch, folder) of the checkpoint a job continues from, None to start afresh: the
    newest complete one in `workdir`, or `offered` (copied in) when that is newer. The epochs
    it holds that never reached `sink` (a crash in between) are logged first."""
    start = workdir.latest_checkpoint()
    if offered is not None:
        epoch = checkpoint_epoch(offered)
        if epoch is not None and (start is None or epoch > start[0]):
            start = workdir.adopt_checkpoint(offered)
    if start is not None:
        relog_missing_epochs(sink, start[1])
    return start


def relog_missing_epochs(sink: EpochSink, folder: Path) -> None:
    """Log the epochs the checkpoint in `folder` holds that `sink` does not."""
    done = sink.logged_steps(EPOCH_KEY)
    for entry in checkpoint_history(folder):
        if int(entry["epoch"]) not in done:
            sink.log_metrics(history_metrics(entry), step=int(entry["epoch"]))


def log_best(
    sink: EpochSink, dev_metrics: Mapping[str, float], best_epoch: int
) -> dict[str, float]:
    """Log a job's result once: `best_dev_<name>` for each dev metric of its best epoch and
    `best_epoch`, at step = that epoch (beside its `dev_<name>` in the UI's charts). Trials and
    fusions log it alike (a fusion logged its result at step 0, without `best_epoch`). A re-run
    of a finished job logs nothing again. Returns the metrics."""
    final = {f"best_dev_{k}": float(v) for k, v in dev_metrics.items()}
    final["best_epoch"] = best_epoch
    if not sink.logged_steps("best_epoch"):
        sink.log_metrics(final, step=best_epoch)
    return final


def ended_by(error: BaseException) -> str:
    """The status of a run that `error` ended: KILLED when it was stopped (Ctrl-C, SIGTERM, a
    Ray task cancelled with the driver), FAILED otherwise; `status` shows the first as
    interrupted."""
    return "KILLED" if isinstance(error, SystemExit | KeyboardInterrupt) else "FAILED"


def end_quietly(sink: EpochSink, status: str, say: Say = print) -> None:
    """End the run without hiding the error that got us here: a failure to end it is said,
    not raised; on a full disk, not even said (the command's own line says the disk is full,
    or that it was interrupted): the run stays RUNNING, which the next run reopens as it does
    an interrupted one's."""
    try:
        sink.end(status)
    except Exception as error:  # noqa: BLE001 - the original error matters more
        if not is_disk_full(error):
            say(f"could not mark run {sink.run_id} {status}: {error}")
