"""One fusion's training, in the fusion job's process or on Ray Train workers.

`FusionTraining()` trains the fusion over the pulled adapters in the job's work folder: it
resumes after the newest finished epoch, logs each epoch to the job's MLflow run and a line
through `say`, and writes the fusion-weight heatmap (the paper's Figure 4 for the target) beside
the run directory. With `resources.workers` > 1, `on_workers()` runs the same steps as a Ray
Train run of that many data-parallel workers (`tuning/workers.py`): rank 0 logs, says and
writes; a restarted worker group continues from the work folder's newest checkpoint.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import torch

from adapterfleet.config import PipelineConfig
from adapterfleet.console import Say
from adapterfleet.fusion import FusionConfig, write_fusion_weights
from adapterfleet.orchestration.fusion_plan import FusionPlan
from adapterfleet.orchestration.local import prepare_task
from adapterfleet.registry import MlflowRunLogger
from adapterfleet.training import Callback, EpochLog, EpochRecorder, JobWorkdir, resume_job
from adapterfleet.training.distributed import DataParallel
from adapterfleet.training.modes import RunResult, read_run_file, task_batches, train_fusion_run
from adapterfleet.tuning.inputs import log_task_inputs
from adapterfleet.tuning.spec import RAY_DIR, TRAIN_DIR
from adapterfleet.tuning.workers import fit_on_workers


@dataclass(frozen=True)
class FusionTraining:
    """Everything one fusion's training needs; plain data, so Ray Train can ship it."""

    config: PipelineConfig  # with the target's own fusion settings
    plan: FusionPlan
    adapter_dirs: list[Path]  # the plan's adapters, pulled, in the config's order
    work: Path  # the job's work folder: checkpoints and the run directory
    logger: MlflowRunLogger
    say: Say
    registered_at: float | None = None  # the last adapter's registration, when the job waited

    def __call__(self, device: torch.device | None = None) -> RunResult:
        """Train here (or as one rank of a worker group), resuming after the newest epoch."""
        group = DataParallel.current()
        target, training = self.plan.target, self.config.fusion.training
        workdir = JobWorkdir(self.work)
        tokenized = prepare_task(self.config, target)
        callbacks: list[Callback] = []
        start = None
        if group.is_main:
            log_task_inputs(self.logger, self.config.tasks[target], tokenized, self.say)
            callbacks = self._callbacks(workdir)
            start = resume_job(workdir, self.logger)
            if start is not None:
                self.say(f"fusion {target}: resuming after epoch {start[0]}")
        sources = list(self.config.fusion.targets[target])
        run = train_fusion_run(
            tokenized,
            self.config.base,
            self.adapter_dirs,
            training,
            workdir.run_dir,
            fusion_config=FusionConfig.preset(self.config.fusion.preset),
            adapter_sha256=[self.plan.versions[t].sha256 for t in sources],
            metrics=self.config.tasks[target].metrics,
            callbacks=callbacks,
            resume_from=group.share(start[1] if start is not None else None),
            device=device,
        )
        if group.is_main:
            _, dev = task_batches(tokenized, training)
            write_fusion_weights(run.model, target, sources, dev, workdir.run_dir)
        return run

    def _callbacks(self, workdir: JobWorkdir) -> list[Callback]:
        label = f"fusion {self.plan.target} ({self.plan.trial_id})"
        callbacks: list[Callback] = [
            EpochRecorder(workdir, self.logger),
            EpochLog(self.say, self.config.fusion.training.max_epochs, label),
        ]
        if self.registered_at is not None:
            callbacks.append(FirstStepDelay(self.logger, self.registered_at))
        return callbacks

    def on_workers(self) -> RunResult:
        """Train on `resources.workers` Ray Train workers; the run directory rank 0 wrote."""
        fit_on_workers(
            self,
            self.config.resources,
            name=self.plan.trial_id,
            storage=Path(self.config.storage) / RAY_DIR / TRAIN_DIR / "fusion",
        )
        return read_run_file(JobWorkdir(self.work).run_dir)


class FirstStepDelay(Callback):
    """Logs how long after the last adapter's registration the first step came
    (`first_step_delay_s`)."""

    def __init__(self, logger: MlflowRunLogger, registered_at: float) -> None:
        self.logger, self.registered_at = logger, registered_at

    def on_train_start(self) -> None:
        self.logger.log_metrics({"first_step_delay_s": time.time() - self.registered_at})
