"""The Tune trainable: one adapter trial, its MLflow run, per-epoch checkpoints, resume.

Runs in a Ray worker, with the job lifecycle of `training.lifecycle`: every epoch, the loop
checkpoint goes into the trial's own folder, the epoch's metrics into MLflow (step = epoch), then
both to Tune with `ray.tune.report` (the epoch hook). A retried or restored trial continues after
the newest finished epoch. A trial of several workers (`resources.workers`) runs the same steps
as a Ray Train run inside the trial (`tuning/workers.py`).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import ray.tune
import torch

from adapterfleet.adapters import ADAPTER_WEIGHTS, AdapterConfig, load_tokenizer, sha256_file
from adapterfleet.console import MarkedSay
from adapterfleet.data import load_task, tokenize_task
from adapterfleet.registry import TAG_SHA256, TAG_SWEEP, TAG_TASK, MlflowRunLogger, open_trial_run
from adapterfleet.registry.descriptions import TAG_NOTE, trial_note
from adapterfleet.registry.tags import TAG_DRIVER, TAG_STOPPED_EARLY, TAG_TORCH_THREADS
from adapterfleet.training import (
    EpochRecorder,
    EpochReport,
    JobWorkdir,
    TrainConfig,
    end_quietly,
    ended_by,
    log_best,
    resume_job,
)
from adapterfleet.training.callbacks import ProgressLog
from adapterfleet.training.loop import TrainingDiverged
from adapterfleet.training.metrics import signed
from adapterfleet.training.modes import train_single
from adapterfleet.tuning.inputs import log_task_inputs
from adapterfleet.tuning.spec import OBJECTIVE_KEY, SweepContext, TrialParams, trial_run_name

TRAINABLE_NAME = "adapter_trial"
FINAL_KEY = "final"  # set on the last result of a trial that ended normally
# In a trial's folder once it diverged: its retries, from the same checkpoint and random state,
# would diverge alike (each an epoch's work, two of them by default); they fail at once instead.
DIVERGED_FILE = "diverged.txt"


def make_trainable(ctx: SweepContext, resources: dict[str, float]) -> Any:
    """The trainable Tune runs, registered as `adapter_trial` (restore needs the same name),
    with `ctx` bound by value and `resources` per trial (a trial of several workers reserves
    nothing itself: its workers are Ray Train's actors)."""

    def adapter_trial(config: dict[str, Any]) -> None:
        if not trains_now(ctx, config):
            # a result all the same: Tune's own reporter printed `Trial ... completed. Last
            # result: ` at any verbosity for a trial that reported none
            ray.tune.report({NOT_RUN_KEY: 1})
            return
        if ctx.config.resources.distributed:
            from adapterfleet.tuning.workers import run_trial_on_workers

            run_trial_on_workers(config, ctx)
        else:
            run_trial(config, ctx)

    adapter_trial.__name__ = adapter_trial.__qualname__ = TRAINABLE_NAME
    return ray.tune.with_resources(adapter_trial, resources)


NOT_RUN_KEY = "not_run"  # the one result of a trial `trains_now` says no to


def trains_now(ctx: SweepContext, config: dict[str, Any]) -> bool:
    """Whether this run trains the trial's task. A restored sweep brings back every unfinished
    trial, also those of a task registered since it was interrupted (by another config of the
    pipeline): such a trial ends at once, unrun. It has no sweep run here to reopen its MLflow
    run under, and once reopened another sweep's run of its trial id (a registered version's
    source) and logged its epochs into it."""
    return TrialParams.from_config(config).task in ctx.parent_runs


class EpochReporter:
    """The trial's epoch hook: the epoch's metrics and checkpoint to Tune (`ray.tune.report`
    and its Checkpoint), or to Ray Train on a worker (theirs; the checkpoint from rank 0 only,
    `folder` None elsewhere). `ray.tune.report` ends a trial its scheduler stops with
    `SystemExit(0)`; the epoch is kept in `stopped_after`."""

    def __init__(
        self, run_id: str, report: Callable[..., None] = ray.tune.report, checkpoints: Any = None
    ) -> None:
        self.run_id = run_id
        self.report = report
        self.checkpoints = checkpoints or ray.tune.Checkpoint
        self.stopped_after: int | None = None

    def __call__(self, report: EpochReport, metrics: dict[str, float], folder: Path | None) -> None:
        best = {f"best_dev_{report.metric}": report.best_metric, "best_epoch": report.best_epoch}
        best[OBJECTIVE_KEY] = signed(report.metric, report.best_metric)
        seconds = {"epoch_seconds": report.epoch_seconds}  # for the driver's epoch line
        checkpoint = None if folder is None else self.checkpoints.from_directory(str(folder))
        try:
            self.report(
                {**metrics, **best, **seconds, "epoch": report.epoch, "mlflow_run_id": self.run_id},
                checkpoint=checkpoint,
            )
        except SystemExit as stop:  # how `report` ends a trial its scheduler stops (code 0)
            if not stop.code:
                self.stopped_after = report.epoch
            raise


def resume_point(
    workdir: JobWorkdir, logger: MlflowRunLogger, checkpoint: Any
) -> tuple[int, Path] | None:
    """Where the trial continues: the newer of the `checkpoint` offered (Tune's, or Train's on
    a worker; None) and the trial's own, its epochs missing from MLflow logged first. Tune keeps a
    copy of every reported checkpoint, but the driver writes its experiment state only every
    few seconds: after a driver crash Tune may hand a trial an older checkpoint than the newest
    one the trial finished."""
    if checkpoint is None:
        return resume_job(workdir, logger)
    with checkpoint.as_directory() as folder:
        return resume_job(workdir, logger, offered=Path(folder))


def trial_config(ctx: SweepContext, params: TrialParams) -> TrainConfig:
    return dataclasses.replace(
        ctx.config.adapters.training_for(params.task),
        learning_rate=params.learning_rate,
        seed=params.seed,
    )


def open_run(ctx: SweepContext, params: TrialParams, train: TrainConfig) -> MlflowRunLogger:
    stage = ctx.config.adapters
    note = trial_note(
        params.task,
        params.trial_id,
        stage.architecture,
        ctx.config.base_model,
        trial_settings(params),
        train.max_epochs,
    )
    return open_trial_run(
        ctx.tracking_uri,
        ctx.experiment_id,
        ctx.parent_runs.get(params.task),
        params.trial_id,
        run_name=trial_run_name(params.trial_id, ctx.sweep_name),
        params={
            **params.to_config(),
            "architecture": stage.architecture,
            "base_model": ctx.config.base_model,
            "max_length": ctx.config.max_length,
            **train.run_params(),
        },
        tags={
            TAG_TASK: params.task,
            TAG_SWEEP: ctx.sweep_name,
            TAG_NOTE: note,
            TAG_DRIVER: ctx.driver,  # not this worker: the driver ends the run on Ctrl-C
            TAG_TORCH_THREADS: max(1, int(ctx.cpu)),  # to train it again to the last digit
        },
    )


def trial_progress(params: TrialParams, train: TrainConfig) -> ProgressLog:
    """The trial's lines within an epoch longer than a minute, relayed to the driver's console
    (its epoch lines come from its Tune results; these, one a minute, are no results)."""
    label = f"trial {params.trial_id}"
    return ProgressLog(MarkedSay(label), train.max_epochs, label)


def trial_settings(params: TrialParams) -> str:
    """The trial's grid point in words, for descriptions."""
    return (
        f"reduction factor {params.reduction_factor}, learning rate {params.learning_rate}, "
        f"seed {params.seed}"
    )


def run_trial(config: dict[str, Any], ctx: SweepContext) -> None:
    """Train one grid point; see the module docstring."""
    torch.set_num_threads(max(1, int(ctx.cpu)))
    params = TrialParams.from_config(config)
    workdir = JobWorkdir(ctx.trial_dir(params.trial_id))
    if (workdir.root / DIVERGED_FILE).is_file():
        raise TrainingDiverged((workdir.root / DIVERGED_FILE).read_text())
    spec = ctx.config.tasks[params.task]
    tokenizer = load_tokenizer(ctx.config.base_model)
    tokenized = tokenize_task(load_task(spec), tokenizer, ctx.config.max_length, ctx.tokens_dir)
    train = trial_config(ctx, params)
    logger = open_run(ctx, params, train)
    log_task_inputs(logger, spec, tokenized)
    tune_report = EpochReporter(logger.run_id)
    try:
        start = resume_point(workdir, logger, ray.tune.get_checkpoint())
        with logger.system_metrics():
            result = train_single(
                "st-a",
                tokenized,
                ctx.config.base,
                train,
                workdir.run_dir,
                adapter=AdapterConfig(ctx.config.adapters.architecture, params.reduction_factor),
                metrics=spec.metrics,
                callbacks=[
                    EpochRecorder(workdir, logger, tune_report),
                    trial_progress(params, train),
                ],
                resume_from=start[1] if start is not None else None,
            )
        final = finish_run(workdir, logger, params, result.dev_metrics, result.fit.best_epoch)
        final.update(epochs_run=result.fit.epochs_run, stop_reason=result.fit.stop_reason)
    except BaseException as error:
        if isinstance(error, SystemExit) and tune_report.stopped_after is not None:
            end_stopped_early(logger, tune_report.stopped_after)
        else:
            end_failed(logger, error)
        if isinstance(error, TrainingDiverged):
            mark_diverged(workdir, error)
        raise
    report_final(logger, final, signed(train.metric, result.fit.best_metric))


def mark_diverged(workdir: JobWorkdir, error: TrainingDiverged) -> None:
    """`DIVERGED_FILE` with the error's words (an epoch-1 divergence made no folder yet); a
    mark that cannot be written leaves the retries to diverge again, not another error."""
    with contextlib.suppress(OSError):
        workdir.root.mkdir(parents=True, exist_ok=True)
        (workdir.root / DIVERGED_FILE).write_text(str(error))


def end_failed(logger: MlflowRunLogger, error: BaseException) -> None:
    """End the run of a trial that raised: KILLED when it was stopped, FAILED otherwise."""
    end_quietly(logger, ended_by(error))


def report_final(logger: MlflowRunLogger, final: dict[str, Any], objective: float) -> None:
    """End the run FINISHED, then the trial's last result to Tune (marked `FINAL_KEY`)."""
    logger.end("FINISHED")
    ray.tune.report(
        {**final, OBJECTIVE_KEY: objective, FINAL_KEY: 1, "mlflow_run_id": logger.run_id}
    )


def finish_run(
    workdir: JobWorkdir,
    logger: MlflowRunLogger,
    params: TrialParams,
    dev_metrics: dict[str, float],
    best_epoch: int,
) -> dict[str, Any]:
    """Log the adapter (and head) folders, the final metrics once, and the tags."""
    run = workdir.run_dir
    logger.log_artifacts(run / "adapter", "adapter")
    logger.log_artifacts(run / "head", "head")
    final = log_best(logger, dev_metrics, best_epoch)
    sha = sha256_file(run / "adapter" / ADAPTER_WEIGHTS)
    logger.set_tags(
        {
            "reduction_factor": params.reduction_factor,
            "learning_rate": params.learning_rate,
            "seed": params.seed,
            TAG_SHA256: sha,
        }
    )
    return {**final, "adapter_sha256": sha}


def end_stopped_early(logger: MlflowRunLogger, epoch: int) -> None:
    """A trial the scheduler stopped ended as planned: FINISHED, tagged with its last epoch,
    as Tune marks it TERMINATED and not ERROR (`status` counts it apart). The trial does it,
    and the driver again (Tune may end the trial's actor before its thread gets that far)."""
    try:
        logger.set_tags({TAG_STOPPED_EARLY: epoch})
    except Exception as error:  # noqa: BLE001 - Tune's stop must go through
        print(f"could not tag MLflow run {logger.run_id} as stopped early: {error}")
    end_quietly(logger, "FINISHED")
