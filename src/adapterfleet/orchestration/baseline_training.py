"""One baseline job's training (a column of the paper's Table 1), in the job's Ray task or on
Ray Train workers: head-only, full fine-tuning and ST-A Houlsby through `train_single`, MT-A
through `train_mt_a`, fusion over MT-A through `train_fusion_run` (with its fusion-weights
heatmap). With `resources.workers` > 1 the fit loop trains data-parallel and rank 0 alone
resumes, logs, says and writes."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from adapterfleet.config import PipelineConfig
from adapterfleet.console import Say
from adapterfleet.data.cache import TokenizedTask
from adapterfleet.fusion import FusionConfig, write_fusion_weights
from adapterfleet.orchestration.local import prepare_task
from adapterfleet.registry import MlflowRunLogger
from adapterfleet.training import (
    Callback,
    EpochLog,
    EpochRecorder,
    JobWorkdir,
    TrainConfig,
    resume_job,
)
from adapterfleet.training.distributed import DataParallel
from adapterfleet.training.modes import mode_adapter, task_batches, train_fusion_run, train_single
from adapterfleet.training.multitask import train_mt_a
from adapterfleet.tuning.inputs import log_task_inputs

if TYPE_CHECKING:
    from adapterfleet.orchestration.baselines import BaselineJob, BaselineOutcome


@dataclass(frozen=True)
class BaselineTraining:
    """One baseline job's training, here or as one rank of a Ray Train worker group (then the
    fit loop trains data-parallel, and rank 0 alone resumes, logs, says and writes)."""

    config: PipelineConfig
    job: BaselineJob
    training: TrainConfig
    work: JobWorkdir
    logger: MlflowRunLogger
    say: Say
    mt_a: BaselineOutcome | None

    def __call__(self, device: torch.device | None = None) -> dict[str, dict[str, float]]:
        group, job = DataParallel.current(), self.job
        names = self.config.adapter_tasks if job.system == "mt-a" else (job.task,)
        tasks = {t: prepare_task(self.config, t) for t in names}
        callbacks: list[Callback] = []
        start = None
        if group.is_main:
            for task, tokenized in tasks.items():
                log_task_inputs(self.logger, self.config.tasks[task], tokenized, self.say)
            start = resume_job(self.work, self.logger)
            if start is not None:
                self.say(f"baseline {job.label}: resuming after epoch {start[0]}")
            label = f"baseline {job.label} ({job.job_id})"
            callbacks = [
                EpochRecorder(self.work, self.logger),
                EpochLog(self.say, self.training.max_epochs, label),
            ]
        resume = group.share(start[1] if start is not None else None)
        out = self.work.run_dir
        return _train(
            self.config, job, tasks, self.training, out, callbacks, resume, self.mt_a, device
        )


def _train(
    config: PipelineConfig,
    job: BaselineJob,
    tasks: dict[str, TokenizedTask],
    training: TrainConfig,
    out: Path,
    callbacks: list[Callback],
    resume: Path | None,
    mt_a: BaselineOutcome | None,
    device: torch.device | None = None,
) -> dict[str, dict[str, float]]:
    """Train `job` on `tasks` (the job's task; MT-A's: every adapter task) into `out` (on
    `device`, else the config's); its dev metrics per task."""
    if job.system == "mt-a":
        return _train_mt_a(config, tasks, training, out, callbacks, resume, device)
    tokenized = tasks[job.task]
    if job.system == "fusion-mt-a":
        if mt_a is None:
            raise ValueError(f"baseline {job.label}: needs the outcome of its MT-A job")
        mt_a_dir = Path(mt_a.run_dir)
        return _train_fusion_mt_a(
            config, job, tokenized, training, out, callbacks, resume, mt_a_dir, device
        )
    adapter = mode_adapter(job.system, config.baselines.reduction_factor)  # head, full: None
    run = train_single(
        job.system,
        tokenized,
        config.base,
        training,
        out,
        adapter=adapter,
        metrics=config.tasks[job.task].metrics,
        callbacks=callbacks,
        resume_from=resume,
        device=device,
    )
    return {job.task: dict(run.dev_metrics)}


def _train_mt_a(
    config: PipelineConfig,
    tasks: dict[str, TokenizedTask],
    training: TrainConfig,
    out: Path,
    callbacks: list[Callback],
    resume: Path | None,
    device: torch.device | None,
) -> dict[str, dict[str, float]]:
    """MT-A: adapters for every adapter task trained jointly with the base model."""
    run = train_mt_a(
        tasks,
        config.base,
        training,
        out,
        reduction_factor=config.baselines.reduction_factor,
        metrics={t: config.tasks[t].metrics for t in tasks},
        callbacks=callbacks,
        resume_from=resume,
        device=device,
    )
    return dict(run.lineage.get("task_metrics", {}))


def _train_fusion_mt_a(
    config: PipelineConfig,
    job: BaselineJob,
    tokenized: TokenizedTask,
    training: TrainConfig,
    out: Path,
    callbacks: list[Callback],
    resume: Path | None,
    mt_a_dir: Path,
    device: torch.device | None,
) -> dict[str, dict[str, float]]:
    """A fusion over the MT-A adapters of `fusion.targets.<task>`, on MT-A's base model (both
    in `mt_a_dir`), with its fusion-weights heatmap."""
    sources = config.fusion.targets[job.task]
    run = train_fusion_run(
        tokenized,
        str(mt_a_dir / "model"),
        [mt_a_dir / "adapters" / t for t in sources],
        training,
        out,
        fusion_config=FusionConfig.preset(config.fusion.preset),
        metrics=config.tasks[job.task].metrics,
        callbacks=callbacks,
        resume_from=resume,
        device=device,
    )
    if DataParallel.current().is_main:
        _, dev = task_batches(tokenized, training)
        write_fusion_weights(run.model, job.task, list(sources), dev, out)
    return {job.task: dict(run.dev_metrics)}
