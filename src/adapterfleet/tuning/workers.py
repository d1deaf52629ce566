"""Trials of several workers: a Ray Train `TorchTrainer` inside the Tune trial.

Train V2's documented pattern for Train inside Tune: the Tune trial runs a small driver
(`run_trial_on_workers`) that opens the trial's MLflow run, starts K data-parallel workers (DDP:
gloo on CPU, NCCL on GPU) and waits for them. Each worker runs `worker_loop`, the same steps as a
one-process trial (`tuning/trial.py`) through the same fit loop, which trains data-parallel
inside the process group Ray Train sets up (`training/distributed.py`): the global batch stays
the config's `batch_size`, each rank takes its rows of every length-grouped batch.

Rank 0 alone logs to MLflow, writes the checkpoints into the trial's folder and the adapter; every
rank reports each epoch to Ray Train (`ray.train.report`, rank 0 with the checkpoint), and
`TuneReportCallback` forwards rank 0's metrics to Tune, so the driver's epoch lines and the
registration read them as from any trial. A killed worker: Ray Train restarts the group
(`FailureConfig`), and every rank continues after the newest finished epoch (Train's checkpoint
or the trial folder's, whichever is newer). A restarted driver (Tune's retry, or a resumed
sweep) finds Train's run by its stable name and continues it the same way; its epochs are logged
once, in the one MLflow run of the trial. `fit_on_workers` runs a fusion's or a baseline's
training the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import ray.train
import ray.train.torch
import torch
from ray.tune.integration.ray_train import TuneReportCallback

from adapterfleet.adapters import AdapterConfig, load_tokenizer
from adapterfleet.config import Resources
from adapterfleet.data import load_task, tokenize_task
from adapterfleet.registry import MlflowRunLogger
from adapterfleet.training import EpochRecorder, EpochReport, JobWorkdir
from adapterfleet.training.callbacks import Callback
from adapterfleet.training.distributed import DataParallel
from adapterfleet.training.lifecycle import epoch_metrics
from adapterfleet.training.metrics import signed
from adapterfleet.training.modes import read_run_file, train_single
from adapterfleet.tuning.inputs import log_task_inputs
from adapterfleet.tuning.spec import RAY_DIR, TRAIN_DIR, SweepContext, TrialParams
from adapterfleet.tuning.trial import (
    EpochReporter,
    end_failed,
    finish_run,
    open_run,
    report_final,
    resume_point,
    trial_config,
    trial_progress,
)

# Worker-group restarts Ray Train makes within one driver, before the trial fails (Tune then
# retries the whole trial, `DEFAULT_MAX_FAILURES` times).
WORKER_GROUP_RESTARTS = 2


def run_trial_on_workers(config: dict[str, Any], ctx: SweepContext) -> None:
    """The Tune trial of a grid point trained by `resources.workers` workers."""
    params = TrialParams.from_config(config)
    workdir = JobWorkdir(ctx.trial_dir(params.trial_id))
    train = trial_config(ctx, params)
    logger = open_run(ctx, params, train)
    try:
        build_trainer(ctx, params, config, logger).fit()
        fitted = read_run_file(workdir.run_dir).fit
        final = finish_run(workdir, logger, params, fitted.best_metrics, fitted.best_epoch)
        final.update(epochs_run=fitted.epochs_run, stop_reason=fitted.stop_reason)
    except BaseException as error:
        end_failed(logger, error)
        raise
    report_final(logger, final, signed(train.metric, fitted.best_metric))


def build_trainer(
    ctx: SweepContext, params: TrialParams, config: dict[str, Any], logger: MlflowRunLogger
) -> ray.train.torch.TorchTrainer:
    """The trial's Ray Train run: a stable name (a restarted driver continues it), Tune's
    callback."""
    return workers_trainer(
        worker_loop,
        {"trial": config, "ctx": ctx, "run": logger},
        ctx.config.resources,
        name=params.trial_id,
        storage=ctx.storage / RAY_DIR / TRAIN_DIR / ctx.sweep_name,
        callbacks=[TuneReportCallback()],
    )


def workers_trainer(
    loop: Callable[[dict[str, Any]], None],
    loop_config: dict[str, Any],
    resources: Resources,
    *,
    name: str,
    storage: Path,
    callbacks: Sequence[Any] = (),
) -> ray.train.torch.TorchTrainer:
    """A Ray Train run of `loop(loop_config)` on `resources.workers` workers of `resources`
    each, in the process group of `resources.torch_backend`; Ray Train restarts the worker group
    `WORKER_GROUP_RESTARTS` times and keeps two checkpoints under `storage / name`."""
    per_worker = {"CPU": resources.cpu}
    if resources.gpu > 0:
        per_worker["GPU"] = resources.gpu
    return ray.train.torch.TorchTrainer(
        loop,
        train_loop_config=loop_config,
        torch_config=ray.train.torch.TorchConfig(backend=resources.torch_backend),
        scaling_config=ray.train.ScalingConfig(
            num_workers=resources.workers,
            use_gpu=resources.gpu > 0,
            resources_per_worker=per_worker,
        ),
        run_config=ray.train.RunConfig(
            name=name,
            storage_path=str(storage),
            callbacks=list(callbacks),
            failure_config=ray.train.FailureConfig(max_failures=WORKER_GROUP_RESTARTS),
            checkpoint_config=ray.train.CheckpointConfig(num_to_keep=2),
        ),
    )


def worker_device() -> torch.device:
    """The device Ray Train gave this worker (its GPU, or the CPU)."""
    return ray.train.torch.get_device()


def fit_on_workers(
    job: Callable[..., Any], resources: Resources, *, name: str, storage: Path
) -> None:
    """`job(device=...)` (picklable) on each of `resources.workers` Ray Train workers: a
    fusion's or a baseline's training, whose fit loop then trains data-parallel. Its files and
    metrics are rank 0's; a restarted worker group calls `job` again, which resumes."""
    loop_config = {"job": job, "cpu": resources.cpu}
    workers_trainer(_call_job, loop_config, resources, name=name, storage=storage).fit()


def _call_job(loop_config: dict[str, Any]) -> None:
    torch.set_num_threads(max(1, int(loop_config["cpu"])))
    loop_config["job"](device=worker_device())


class _ReportOnly(Callback):
    """Ranks other than 0: each epoch's report to Ray Train (no checkpoint, no MLflow)."""

    def __init__(self, hook: EpochReporter) -> None:
        self.hook = hook

    def on_epoch_end(self, report: EpochReport) -> None:
        self.hook(report, epoch_metrics(report), None)


def worker_loop(loop_config: dict[str, Any]) -> None:
    """One data-parallel worker of a trial: its rows of every batch, the same fit loop."""
    ctx: SweepContext = loop_config["ctx"]
    logger: MlflowRunLogger = loop_config["run"]
    params = TrialParams.from_config(loop_config["trial"])
    torch.set_num_threads(max(1, int(ctx.cpu)))
    group = DataParallel.current()
    workdir = JobWorkdir(ctx.trial_dir(params.trial_id))
    spec = ctx.config.tasks[params.task]
    tokenizer = load_tokenizer(ctx.config.base_model)
    tokenized = tokenize_task(load_task(spec), tokenizer, ctx.config.max_length, ctx.tokens_dir)
    hook = EpochReporter(logger.run_id, ray.train.report, ray.train.Checkpoint)
    callbacks: list[Callback] = [_ReportOnly(hook)]
    start = None
    if group.is_main:
        log_task_inputs(logger, spec, tokenized)
        progress = trial_progress(params, trial_config(ctx, params))
        callbacks = [EpochRecorder(workdir, logger, hook), progress]
        start = resume_point(workdir, logger, ray.train.get_checkpoint())
    start_folder = group.share(start[1] if start is not None else None)
    with logger.system_metrics() if group.is_main else nullcontext():
        train_single(
            "st-a",
            tokenized,
            ctx.config.base,
            trial_config(ctx, params),
            workdir.run_dir,
            adapter=AdapterConfig(ctx.config.adapters.architecture, params.reduction_factor),
            metrics=spec.metrics,
            callbacks=callbacks,
            resume_from=start_folder,
            device=worker_device(),
        )
