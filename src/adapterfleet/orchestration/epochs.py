"""The callback of every job outside Tune (fusions, baselines): checkpoint, then MLflow, at
every epoch end, so a job that dies (driver killed, node lost) continues after its newest
finished epoch and logs each epoch once."""

from __future__ import annotations

from adapterfleet.registry import MlflowRunLogger
from adapterfleet.training import Callback, EpochReport
from adapterfleet.training.workdir import JobWorkdir


def epoch_metrics(report: EpochReport) -> dict[str, float]:
    """What is logged per epoch (step = epoch): loss, learning rate, `dev_<metric>`."""
    return {
        "train_loss": report.train_loss,
        "learning_rate": report.learning_rate,
        **{f"dev_{k}": v for k, v in report.dev_metrics.items()},
    }


class CheckpointLogger(Callback):
    """Writes the loop checkpoint into `workdir` (keeping only the newest), then logs the
    epoch's metrics to the run of `logger`."""

    def __init__(self, logger: MlflowRunLogger, workdir: JobWorkdir) -> None:
        self.logger, self.workdir = logger, workdir

    def on_epoch_end(self, report: EpochReport) -> None:
        self.workdir.checkpoint_dir(report.epoch).parent.mkdir(parents=True, exist_ok=True)
        report.save_checkpoint(self.workdir.checkpoint_dir(report.epoch))
        self.logger.log_metrics(epoch_metrics(report), step=report.epoch)
        self.workdir.prune_checkpoints(keep_epoch=report.epoch)
