"""Registering each task's best adapter as soon as every trial of the task has ended.

`Registrar` lives in the driver. Tune calls `RegistrationCallback` after each trial; the callback
only carries the sweep name and finds the live `Registrar` of this driver through `activate`, so
the copy Tune restores from `tuner.pkl` after a crash works with the new driver's runs. After
`fit()` the driver calls `Registrar.observe` once more with every trial's outcome, which catches
tasks whose last trial ended while no driver was listening.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import ray.tune

from adapterfleet.adapters import ADAPTER_WEIGHTS, HEAD_WEIGHTS, sha256_file
from adapterfleet.config import PipelineConfig
from adapterfleet.console import Say
from adapterfleet.data.baseline import Chance
from adapterfleet.disk import NOTES, DiskFullError, disk_full, is_disk_full
from adapterfleet.registry import (
    TAG_SWEEP,
    TAG_TASK,
    TAG_TRIAL_ID,
    MlflowRunLogger,
    ModelVersionInfo,
    register_version,
)
from adapterfleet.registry.descriptions import adapter_model_note, adapter_version_note, tag_number
from adapterfleet.registry.tags import TAG_BASE_MODEL_DTYPE, TAG_BASE_MODEL_LAYOUT, TAG_DATA_SHA256
from adapterfleet.training.metrics import metric_direction
from adapterfleet.training.workdir import JobWorkdir
from adapterfleet.tuning.outcomes import (
    TrialOutcome,
    choose_best,
    outcome_of_trial,
    trial_exception,
)
from adapterfleet.tuning.progress import (
    Note,
    Stall,
    note_stall,
    retry_line,
    trial_counts,
    trial_epoch_line,
    with_note,
)
from adapterfleet.tuning.settings import TAG_SETTINGS, best_now, say_taken, settings_tag
from adapterfleet.tuning.spec import (
    TAG_BASE_MODEL,
    TAG_CONFIG_HASH,
    TAG_METRIC,
    TAG_METRIC_DIRECTION,
    TAG_METRIC_VALUE,
    SweepError,
    TrialParams,
    layout_tag,
    sweep_summary,
)
from adapterfleet.tuning.trial import end_stopped_early, trial_settings

_ACTIVE: dict[str, Registrar] = {}


@dataclass
class TaskPlan:
    task: str
    model_name: str
    config_hash: str
    trial_ids: frozenset[str]  # the grid's trials of the task; empty when a searcher picks them
    sweep_run: MlflowRunLogger | None = None
    samples: int = 0  # how many trials a searcher picks for the task
    data_sha256: str | None = None  # its files' content when the sweep was planned

    @property
    def size(self) -> int:
        return self.samples or len(self.trial_ids)

    def ended(self, seen: Mapping[str, TrialOutcome]) -> list[TrialOutcome] | None:
        """The task's trials once every one of them has ended, else None. `seen`: trial id ->
        outcome, for this task's trials that Tune knows of."""
        ids = self.trial_ids or frozenset(seen)
        if len(ids) < self.size or not ids <= set(seen):
            return None
        outcomes = [seen[t] for t in sorted(ids)]
        return outcomes if all(o.ended for o in outcomes) else None


@dataclass
class Registrar:
    uri: str
    config: PipelineConfig
    sweep_name: str
    trials_root: Path
    tasks: dict[str, TaskPlan]
    progress: Say = print
    note: Note | None = None  # the caller's state, after the trial counts of each epoch line
    registered: dict[str, ModelVersionInfo] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)
    diverged: set[str] = field(default_factory=set)  # the failed tasks whose trials diverged
    chances: dict[str, Chance | None] = field(default_factory=dict)  # by task: of dev

    def metric(self, task: str) -> str:
        """The metric `task` is selected on (config/task_metrics.py)."""
        return self.config.adapters.training_for(task).metric

    def epoch_reported(self, params: TrialParams, result: dict, trials: list[Any]) -> None:
        """Print the line of a trial's epoch, with the running count of the `trials` of the
        tasks this run trains (a restored trial of another task is not one of them, and has
        no line: `trains_now`)."""
        if params.task not in self.tasks:
            return
        total = sum(plan.size for plan in self.tasks.values())
        ours = [t for t in trials if TrialParams.from_config(t.config).task in self.tasks]
        counts = with_note(trial_counts([str(t.status) for t in ours], total), self.note)
        max_epochs = self.config.adapters.training_for(params.task).max_epochs
        line = trial_epoch_line(params, result, self.metric(params.task), max_epochs, counts)
        if line is not None:
            self.progress(line)

    def _mark_stopped(self, outcome: TrialOutcome) -> None:
        """End a stopped trial's MLflow run FINISHED with its stop tag (idempotent)."""
        run_id, epoch = outcome.result.get("mlflow_run_id"), outcome.result.get("epoch")
        if run_id and epoch is not None:
            logger = MlflowRunLogger.attach(self.uri, str(run_id), retry_timeout_s=10.0)
            end_stopped_early(logger, int(epoch))

    def trial_ended(self, outcome: TrialOutcome, outcomes: list[TrialOutcome]) -> None:
        """Print a progress line for one trial, then register what became complete."""
        plan = self.tasks.get(outcome.params.task)
        if plan is None:  # a restored sweep's trial of a task registered since (`trains_now`)
            task = outcome.params.task
            what = f"not run, task {task} has its adapter registered already"
            return self.progress(f"trial {outcome.params.trial_id}: {what}")
        total = plan.size
        done = sum(o.ended for o in outcomes if o.params.task == outcome.params.task)
        metric = self.metric(outcome.params.task)
        value = outcome.result.get(f"best_dev_{metric}", float("nan"))
        if outcome.ok:
            what = f"dev {metric} {value:.4f} (epoch {outcome.result.get('best_epoch')})"
            what += self._patience_note(outcome)
        elif outcome.stopped:
            what = f"stopped early after epoch {outcome.result.get('epoch')}, dev {metric} "
            what += f"{value:.4f}"
            self._mark_stopped(outcome)
        else:
            what = f"FAILED ({outcome.error})" if outcome.error else "FAILED"
        self.progress(f"trial {outcome.params.trial_id}: {what} [{done}/{total}]")
        self.observe(outcomes)

    def _patience_note(self, outcome: TrialOutcome) -> str:
        """The note `, patience 3 ended it at epoch 9/30` for a trial early stopping ended."""
        training = self.config.adapters.training_for(outcome.params.task)
        result = outcome.result
        return training.patience_note(result.get("stop_reason"), result.get("epochs_run"))

    def observe(self, outcomes: Iterable[TrialOutcome]) -> None:
        """Register every task whose trials have all ended and succeeded (or were stopped
        early by the scheduler); note the failed."""
        by_task: dict[str, dict[str, TrialOutcome]] = {}
        for outcome in outcomes:
            by_task.setdefault(outcome.params.task, {})[outcome.params.trial_id] = outcome
        for task, plan in self.tasks.items():
            if task in self.registered or task in self.failed:
                continue
            ended = plan.ended(by_task.get(task, {}))
            if ended is None:
                continue
            finished = [o for o in ended if o.ok]
            lost = [o for o in ended if o.diverged]  # a point too steep: the others can win
            bad = [o for o in ended if not o.ok and not o.stopped and not o.diverged]
            if bad or (lost and not finished):
                self.fail(task, failed_trials(bad or lost), diverged=not bad)
            elif not finished:
                self.fail(task, "every trial was stopped early")
            else:
                self.register(task, finished)
                if lost:
                    ids = ", ".join(o.params.trial_id for o in lost)
                    self.progress(f"task {task}: left out trial(s) {ids}, which diverged")

    def fail(self, task: str, reason: str, *, diverged: bool = False) -> None:
        """Note `task` failed (`diverged`: only by trials whose training diverged, which a
        resume cannot mend: they fail again at once)."""
        self.failed[task] = reason
        if diverged:
            self.diverged.add(task)

        self.progress(f"task {task}: not registered, {reason}")
        plan = self.tasks[task]
        if plan.sweep_run is not None:
            plan.sweep_run.end("FAILED")

    def register(self, task: str, outcomes: list[TrialOutcome]) -> ModelVersionInfo:
        plan, metric = self.tasks[task], self.metric(task)
        best = choose_best(outcomes, metric)
        params, value = best.params, float(best.result[f"best_dev_{metric}"])
        weights = JobWorkdir(self.trials_root / params.trial_id).run_dir / "adapter"
        weights = weights / ADAPTER_WEIGHTS
        expected = best.result.get("adapter_sha256")
        if not weights.is_file() or sha256_file(weights) != expected:
            raise SweepError(
                f"task {task}: the adapter of trial {params.trial_id} at {weights} is missing or "
                f"is not the one the trial logged (sha256 {expected}); config.storage must be "
                "the same folder on every node"
            )
        tags = {
            TAG_BASE_MODEL: self.config.base_model,
            TAG_BASE_MODEL_DTYPE: self.config.base_model_dtype,
            TAG_BASE_MODEL_LAYOUT: layout_tag(self.config),
            TAG_CONFIG_HASH: plan.config_hash,
            TAG_METRIC: metric,
            TAG_METRIC_DIRECTION: metric_direction(metric),
            TAG_METRIC_VALUE: tag_number(value),
            TAG_SWEEP: self.sweep_name,
            TAG_TRIAL_ID: params.trial_id,
            TAG_TASK: task,
            "architecture": self.config.adapters.architecture,
            "reduction_factor": params.reduction_factor,
            "learning_rate": params.learning_rate,
            "seed": params.seed,
        }
        tags.update({TAG_DATA_SHA256: plan.data_sha256} if plan.data_sha256 is not None else {})
        settings = settings_tag(self.config, task)  # the next run says what changed
        if settings is not None:
            tags[TAG_SETTINGS] = settings
        run_id = str(best.result["mlflow_run_id"])
        taken = best_now(self.uri, plan.model_name)  # before it moves
        head = weights.parent.parent / "head" / HEAD_WEIGHTS  # logged beside the adapter
        info = register_version(
            self.uri, plan.model_name, run_id, "adapter", weights, tags,
            companions={"head": head} if head.is_file() else None,
            description=adapter_version_note(
                task, params.trial_id, self.sweep_name, trial_settings(params), metric, value
            ),
            model_description=adapter_model_note(task),
        )  # fmt: skip
        self.registered[task] = info
        if plan.sweep_run is not None:  # its summary, then its end, then the line: a driver
            # stopped between them leaves it KILLED or RUNNING, which the next run's plan ends
            best = (params.trial_id, metric, value, info)
            metrics, summary = sweep_summary(self.config, task, self.sweep_name, best)
            plan.sweep_run.log_metrics(metrics)
            plan.sweep_run.set_tags(summary)
            plan.sweep_run.end("FINISHED")
        chance = self.chances.get(task)
        self.progress(
            f"task {task}: registered {info.name} v{info.version} (@best) from trial "
            f"{params.trial_id}, dev {metric} {value:.4f}"
            + (chance.note(metric, value) if chance is not None else "")
        )
        say_taken(self.progress, task, self.config, taken, info)
        return info


def failed_trials(outcomes: list[TrialOutcome]) -> str:
    """`trial(s) t1, t2 failed (<the first cause>)`."""
    cause = next((f" ({o.error})" for o in outcomes if o.error), "")
    return f"trial(s) {', '.join(o.params.trial_id for o in outcomes)} failed{cause}"


@contextmanager
def activate(registrar: Registrar) -> Iterator[Registrar]:
    """Make `registrar` the one `RegistrationCallback`s of its sweep report to."""
    _ACTIVE[registrar.sweep_name] = registrar
    try:
        yield registrar
    finally:
        _ACTIVE.pop(registrar.sweep_name, None)


class RegistrationCallback(ray.tune.Callback):
    """Tune callback: tells the active `Registrar` of `sweep_name` about every epoch a trial
    reports (its progress line) and every ended trial."""

    def __init__(self, sweep_name: str) -> None:
        self.sweep_name = sweep_name
        self.stall = Stall()

    def __getstate__(self) -> dict[str, Any]:
        return {"sweep_name": self.sweep_name}

    def __setstate__(self, state: dict[str, Any]) -> None:
        # Tune pickles it with the experiment: an earlier version's lacks later attributes
        self.__init__(state["sweep_name"])  # type: ignore[misc]

    def on_step_end(self, iteration: int, trials: list, **info: Any) -> None:
        """A full disk that MLflow or Tune logged in this driver (the heartbeat's write, Tune's
        sync of its state) stops the sweep; trials pending with none running for a minute: a
        line says what they wait for."""
        registrar = _ACTIVE.get(self.sweep_name)
        full = NOTES.take()
        if full is not None:
            raise DiskFullError(registrar.config.storage if registrar else None, full)
        if registrar is not None:
            note_stall(self.stall, trials, registrar.config, registrar.progress)

    def on_trial_result(
        self, iteration: int, trials: list, trial: Any, result: dict, **info: Any
    ) -> None:
        registrar = _ACTIVE.get(self.sweep_name)
        if registrar is None:
            return
        try:
            params = TrialParams.from_config(trial.config)
            registrar.epoch_reported(params, result, trials)
        except Exception as error:  # noqa: BLE001 - a progress line never stops the sweep
            registrar.progress(f"(no progress line for a result of {trial}: {error})")

    def on_trial_complete(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self._ended(trials, trial, "finished")

    def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self._ended(trials, trial, "error")

    def on_trial_recover(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        registrar = _ACTIVE.get(self.sweep_name)
        error = self._stop_if_full(registrar, trial)
        line = retry_line(TrialParams.from_config(trial.config).trial_id, error)
        if registrar is not None and line is not None:
            registrar.progress(line)

    def _ended(self, trials: list, trial: Any, status: str) -> None:
        registrar = _ACTIVE.get(self.sweep_name)
        if status == "error":
            self._stop_if_full(registrar, trial)
        if registrar is None:
            return
        ended = outcome_of_trial(trial, status)  # a failed one's pickled error read once
        outcomes = [ended if t is trial else outcome_of_trial(t) for t in trials]
        try:
            registrar.trial_ended(ended, outcomes)
        except Exception as error:  # noqa: BLE001 - retried by the driver after fit()
            if is_disk_full(error):  # no write can succeed: the sweep stops (one line)
                raise disk_full(registrar.config.storage, error) from None
            registrar.progress(f"registration deferred to the end of the sweep: {error}")

    @staticmethod
    def _stop_if_full(registrar: Registrar | None, trial: Any) -> BaseException | None:
        """The failed trial's error; raised out of Tune as `DiskFullError` when it is a full
        disk: its retries would fail alike (they did, for minutes), and so would the others."""
        error = trial_exception(trial)
        if is_disk_full(error):
            raise disk_full(registrar.config.storage if registrar else None, error) from None
        return error
