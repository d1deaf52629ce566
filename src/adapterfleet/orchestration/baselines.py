"""Stage 3 of the pipeline: the other systems of the paper's Table 1, for comparison.

`baselines.systems` of the config, per task of `baselines.tasks` and per seed, each a Ray task
with the per-trial resources and an MLflow run of kind `baseline` tagged with its system, task
and seed (the runs `adapterfleet report` reads):

- `head`, `full`, `st-a-houlsby`: one task each, the modes of `training.modes`;
- `mt-a`: one job per seed over every adapter task jointly (base model fine-tuned); its run has
  kind `mt-a`, and one `baseline` run per task holds that task's dev metrics;
- `fusion-mt-a`: per task, a fusion over the MT-A adapters of `fusion.targets.<task>` on top of
  MT-A's base model; it waits for its seed's MT-A job (Ray passes that job's result).

A job checkpoints every epoch under `<storage>/baselines/<job id>/` and logs each epoch once; a
re-run skips every job whose run finished for the same settings and data (the job id names them:
the content of the tasks' local files counts, so an edited file trains its jobs again) and
resumes the others after their newest finished epoch.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch

from adapterfleet.config import PipelineConfig
from adapterfleet.console import Say
from adapterfleet.errors import cause_text
from adapterfleet.orchestration.baseline_plan import BaselineJob, plan_baselines
from adapterfleet.orchestration.baseline_training import BaselineTraining
from adapterfleet.orchestration.relay import (
    WorkerRelay,
    WorkerSay,
    relayed_remote,
)
from adapterfleet.orchestration.sweep import SweepWatch
from adapterfleet.registry import (
    TAG_PARENT_RUN,
    MlflowRunLogger,
    finished_run_metrics,
    open_baseline_run,
)
from adapterfleet.registry.descriptions import TAG_NOTE, baseline_note
from adapterfleet.training import (
    JobWorkdir,
    TrainConfig,
    end_quietly,
    ended_by,
    log_best,
)
from adapterfleet.training.modes import RUN_FILE, read_run_file
from adapterfleet.tuning.spec import RAY_DIR, TRAIN_DIR
from adapterfleet.tuning.workers import fit_on_workers

MT_A_KIND = "mt-a"  # the joint training run of MT-A; its per-task results are `baseline` runs


@dataclass(frozen=True)
class BaselineOutcome:
    job: BaselineJob
    dev_metrics: dict[str, dict[str, float]]  # task -> its dev metrics (one task but for mt-a)
    trained: bool  # False: its run had finished before
    run_dir: str = ""  # where the job's output lies (MT-A: the model fusion-mt-a builds on)
    seconds: float = 0.0


@dataclass
class BaselineSummary:
    outcomes: list[BaselineOutcome] = field(default_factory=list)
    errors: dict[str, str] = field(default_factory=dict)  # job label -> error


def run_baseline_job(
    config: PipelineConfig,
    job: BaselineJob,
    uri: str,
    experiment_id: str,
    mt_a: BaselineOutcome | None = None,
    *,
    say: Say = print,
) -> BaselineOutcome:
    """Train one job (or find its run finished) and log it, a line per epoch; see the module
    docstring. `mt_a`: for fusion-mt-a, the outcome of its seed's MT-A job."""
    torch.set_num_threads(max(1, int(config.resources.cpu)))
    started = time.time()
    work = JobWorkdir(Path(config.storage).resolve() / "baselines" / job.job_id)
    kind = MT_A_KIND if job.system == "mt-a" else "baseline"
    done = finished_run_metrics(uri, experiment_id, kind, job.job_id)
    if done is not None and (work.run_dir / RUN_FILE).is_file():  # its line says so, once
        return BaselineOutcome(job, _saved_metrics(work.run_dir, job), False, str(work.run_dir))
    training = replace(config.baselines.training_for(job.system, job.task), seed=job.seed)
    logger = _open_run(config, job, training, uri, experiment_id, kind)
    try:
        trainer = BaselineTraining(config, job, training, work, logger, say, mt_a)
        with logger.system_metrics():
            if config.resources.distributed:
                storage = Path(config.storage) / RAY_DIR / TRAIN_DIR / "baselines"
                fit_on_workers(trainer, config.resources, name=job.job_id, storage=storage)
                metrics = _saved_metrics(work.run_dir, job)
            else:
                metrics = trainer()
        _log_result(uri, experiment_id, job, logger, metrics, work.run_dir)
        _log_run_folder(logger, work.run_dir)
    except BaseException as error:
        end_quietly(logger, ended_by(error))
        raise
    logger.end("FINISHED")
    work.clear_checkpoints()
    return BaselineOutcome(job, metrics, True, str(work.run_dir), time.time() - started)


def _open_run(
    config: PipelineConfig,
    job: BaselineJob,
    training: TrainConfig,
    uri: str,
    experiment_id: str,
    kind: str,
) -> MlflowRunLogger:
    """The job's MLflow run (reopened after a crash), with its settings as params."""
    tasks = ",".join(config.adapter_tasks) if job.system == "mt-a" else job.task
    params = {"tasks": tasks, **training.run_params()}
    if job.system in ("st-a-houlsby", "mt-a"):  # the systems that add adapters
        params["reduction_factor"] = config.baselines.reduction_factor
    logger = open_baseline_run(
        uri, experiment_id, job.job_id, job.system, job.task, job.seed, params, kind=kind
    )
    logger.set_description(baseline_note(job.system, tasks.split(","), job.seed))
    return logger


def _log_result(
    uri: str,
    experiment_id: str,
    job: BaselineJob,
    logger: MlflowRunLogger,
    metrics: dict[str, dict[str, float]],
    run_dir: Path,
) -> None:
    """`best_dev_<name>` of each task and `best_epoch`, at that epoch's step, as a trial's and a
    fusion's run hold them; MT-A's joint run holds its `best_epoch`, and each task's result
    goes to a `baseline` run of its own under it."""
    best_epoch = read_run_file(run_dir).fit.best_epoch  # on the workers too: from its run file
    if job.system != "mt-a":
        log_best(logger, metrics[job.task], best_epoch)
        return
    log_best(logger, {}, best_epoch)
    for task, values in metrics.items():
        _log_task_run(uri, experiment_id, job, task, values, best_epoch, logger.run_id)


def _log_run_folder(logger: MlflowRunLogger, run_dir: Path) -> None:
    """The run folder as the run's artifacts, but for a whole encoder (`model/`: full
    fine-tuning, MT-A): that stays on the pipeline's storage, where fusion-mt-a reads it."""
    for child in sorted(run_dir.iterdir()):
        if child.is_dir() and child.name != "model":
            logger.log_artifacts(child, child.name)
        elif child.is_file():
            logger.log_artifact(child)


def _log_task_run(
    uri: str,
    experiment_id: str,
    job: BaselineJob,
    task: str,
    dev_metrics: dict[str, float],
    best_epoch: int,
    parent: str,
) -> None:
    """MT-A's result on one task, as a `baseline` run under the joint training run."""
    logger = open_baseline_run(
        uri, experiment_id, f"{job.job_id}-{task}", job.system, task, job.seed, {"task": task}
    )
    logger.set_tags({TAG_PARENT_RUN: parent, TAG_NOTE: baseline_note(job.system, [task], job.seed)})
    log_best(logger, dev_metrics, best_epoch)
    logger.end("FINISHED")


def _saved_metrics(run_dir: Path, job: BaselineJob) -> dict[str, dict[str, float]]:
    info = json.loads((run_dir / RUN_FILE).read_text())
    if job.system == "mt-a":
        return dict(info["lineage"]["task_metrics"])
    return {job.task: dict(info["dev_metrics"])}


def submit_baselines(
    config: PipelineConfig, uri: str, experiment_id: str, say: Say = print
) -> dict[Any, BaselineJob]:
    """Submit every job of the stage to Ray (fusion-mt-a behind its seed's MT-A job); the
    refs, for `collect_baselines`."""
    jobs = plan_baselines(config)
    if not jobs:
        return {}
    resources = {"num_cpus": config.resources.cpu, "num_gpus": config.resources.gpu}
    if config.resources.distributed:  # the job waits on its Ray Train workers
        resources = {"num_cpus": 0, "num_gpus": 0}
    remote = relayed_remote(run_baseline_job, **resources, max_retries=2, retry_exceptions=False)
    say(f"baselines: {len(jobs)} jobs ({', '.join(config.baselines.systems)})")
    refs: dict[Any, BaselineJob] = {}
    mt_refs: dict[int, Any] = {}
    for job in jobs:
        depends = (mt_refs[job.seed],) if job.system == "fusion-mt-a" else ()
        args = (config, job, uri, experiment_id, *depends)
        ref = remote.remote(run_baseline_job, WorkerSay(job.job_id), *args)
        if job.system == "mt-a":
            mt_refs[job.seed] = ref
        refs[ref] = job
    return refs


class BaselineLauncher(threading.Thread):
    """Submits the baselines stage once no trial of the sweep waits for a slot, or the adapter
    stage has ended: the sweep and the fusions behind it are the critical path, the baselines
    fill the slots they leave."""

    def __init__(
        self, config: PipelineConfig, uri: str, experiment_id: str, say: Say, watch: SweepWatch
    ):
        super().__init__(name="baseline-launcher", daemon=True)
        self.config, self.uri, self.experiment_id, self.say = config, uri, experiment_id, say
        self.watch = watch  # this run's sweep, not a finished one of earlier settings
        self.refs: dict[Any, Any] = {}
        self.error: BaseException | None = None
        self.stage_ended = threading.Event()
        self.cancelled = False

    def run(self) -> None:
        try:
            while not self.stage_ended.wait(2.0):
                if self.watch.all_started(self.config, self.uri):
                    break
            if not self.cancelled:
                self.refs = submit_baselines(self.config, self.uri, self.experiment_id, self.say)
        except BaseException as error:  # noqa: BLE001 - reported by the driver
            self.error = error


def collect_baselines(
    config: PipelineConfig,
    refs: dict[Any, BaselineJob],
    say: Say = print,
    relay: WorkerRelay | None = None,
) -> BaselineSummary:
    """Wait for the submitted jobs, reporting each as it ends (after its own lines, which
    `relay` prints); a failed job is recorded and does not stop the others."""
    import ray

    summary = BaselineSummary()
    pending = list(refs)
    while pending:
        ready, pending = ray.wait(pending, num_returns=1)
        job = refs[ready[0]]
        if relay is not None:
            relay.settle(job.job_id)
        try:
            outcome = ray.get(ready[0])
        except Exception as error:  # noqa: BLE001 - reported with the job, the rest go on
            summary.errors[job.label] = cause_text(error)
            say(f"baseline {job.label}: failed: {summary.errors[job.label]}")
            continue
        summary.outcomes.append(outcome)
        say(f"baseline {job.label}: {_metric_text(config, outcome)}")
    return summary


def _metric_text(config: PipelineConfig, outcome: BaselineOutcome) -> str:
    """`accuracy rte 0.6100`: each task's dev value of the metric it is selected on."""
    system = outcome.job.system
    values = []
    for task, metrics in outcome.dev_metrics.items():
        metric = config.baselines.training_for(system, task).metric
        values.append(f"{metric} {task} {metrics.get(metric, float('nan')):.4f}")
    return ", ".join(values) + ("" if outcome.trained else " (finished before)")
