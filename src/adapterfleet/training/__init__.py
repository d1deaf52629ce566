"""The fit loop: train the given parameters of a frozen-base model, evaluate, stop early, resume;
and the job lifecycle around it (`lifecycle`: per-epoch checkpoints and metrics to an `EpochSink`).

Imports torch, safetensors and tqdm only; tuning and tracking plug in through `Callback` and
`EpochSink`. Names are imported lazily, so ``import adapterfleet.training.config`` (the
settings) loads no torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from adapterfleet._lazy import lazy_exports

if TYPE_CHECKING:
    from adapterfleet.training.callbacks import Callback, EpochLog, EpochReport, FitResult
    from adapterfleet.training.checkpoint import (
        BEST_FILE,
        OPTIMIZER_FILE,
        RNG_FILE,
        STATE_FILE,
        TRAINABLE_FILE,
    )
    from adapterfleet.training.config import TrainConfig
    from adapterfleet.training.evaluation import evaluate
    from adapterfleet.training.lifecycle import (
        EpochHook,
        EpochRecorder,
        EpochSink,
        end_quietly,
        ended_by,
        epoch_metrics,
        log_best,
        relog_missing_epochs,
        resume_job,
    )
    from adapterfleet.training.loop import fit
    from adapterfleet.training.metrics import METRICS, accuracy, compute_metrics, f1
    from adapterfleet.training.optim import build_optimizer, build_scheduler, linear_schedule
    from adapterfleet.training.predict import predict_batches, predict_probabilities
    from adapterfleet.training.workdir import JobWorkdir, checkpoint_epoch, checkpoint_history

_WHERE = {
    "Callback": "callbacks",
    "EpochLog": "callbacks",
    "EpochReport": "callbacks",
    "FitResult": "callbacks",
    "BEST_FILE": "checkpoint",
    "OPTIMIZER_FILE": "checkpoint",
    "RNG_FILE": "checkpoint",
    "STATE_FILE": "checkpoint",
    "TRAINABLE_FILE": "checkpoint",
    "TrainConfig": "config",
    "evaluate": "evaluation",
    "EpochHook": "lifecycle",
    "EpochRecorder": "lifecycle",
    "EpochSink": "lifecycle",
    "end_quietly": "lifecycle",
    "ended_by": "lifecycle",
    "epoch_metrics": "lifecycle",
    "log_best": "lifecycle",
    "relog_missing_epochs": "lifecycle",
    "resume_job": "lifecycle",
    "fit": "loop",
    "METRICS": "metrics",
    "accuracy": "metrics",
    "compute_metrics": "metrics",
    "f1": "metrics",
    "build_optimizer": "optim",
    "build_scheduler": "optim",
    "linear_schedule": "optim",
    "predict_batches": "predict",
    "predict_probabilities": "predict",
    "JobWorkdir": "workdir",
    "checkpoint_epoch": "workdir",
    "checkpoint_history": "workdir",
}
__all__ = [
    "BEST_FILE",
    "METRICS",
    "OPTIMIZER_FILE",
    "RNG_FILE",
    "STATE_FILE",
    "TRAINABLE_FILE",
    "Callback",
    "EpochHook",
    "EpochLog",
    "EpochRecorder",
    "EpochReport",
    "EpochSink",
    "FitResult",
    "JobWorkdir",
    "TrainConfig",
    "accuracy",
    "build_optimizer",
    "build_scheduler",
    "checkpoint_epoch",
    "checkpoint_history",
    "compute_metrics",
    "end_quietly",
    "ended_by",
    "epoch_metrics",
    "log_best",
    "evaluate",
    "f1",
    "fit",
    "linear_schedule",
    "predict_batches",
    "predict_probabilities",
    "relog_missing_epochs",
    "resume_job",
]

__getattr__, __dir__ = lazy_exports(__name__, globals(), _WHERE)
