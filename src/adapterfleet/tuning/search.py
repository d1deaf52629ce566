"""Search and early stopping for the sweep that never compare trials of different tasks.

`PerTaskScheduler` keeps one ASHA (`AsyncHyperBandScheduler`) per task and hands each trial to
its task's; `PerTaskSearcher` keeps one `OptunaSearch` per task and asks each for `num_samples`
trials, taking the tasks in turn. `tune_options` gives the `TuneConfig` arguments of a config.

Resume (Ray 2.60): `Tuner.restore` unpickles both from `tuner.pkl`, as they were when the sweep
started. Tune then loads the searcher's state from the `searcher-state-*.pkl` it writes with
every experiment checkpoint (`save` / `restore` below). It saves no scheduler state: after a
restore each task's ASHA starts with empty rungs, and judges the trials that still run against
each other only.
"""

from __future__ import annotations

import pickle
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ray.tune.experiment import Trial
from ray.tune.schedulers import AsyncHyperBandScheduler, FIFOScheduler
from ray.tune.search import Searcher

from adapterfleet.config import AdapterStage, PipelineConfig
from adapterfleet.tuning.spec import OBJECTIVE_KEY, SAMPLE_KEY, trial_point

TASK_KEY = "task"
TIME_ATTR = "epoch"  # in every epoch's report, not in the final one: ASHA leaves that alone
MODE = "max"  # of OBJECTIVE_KEY: higher is better whatever each task's metric (mse negated)


class _PickledState:
    """`save` / `restore` as Tune calls them: the whole object state in one pickle."""

    def save(self, checkpoint_path: str) -> None:
        with open(checkpoint_path, "wb") as file:
            pickle.dump(self.__dict__, file)

    def restore(self, checkpoint_path: str) -> None:
        with open(checkpoint_path, "rb") as file:
            self.__dict__.update(pickle.load(file))


class PerTaskScheduler(_PickledState, FIFOScheduler):
    """ASHA per task: a trial's epochs are compared with those of its own task only.

    `max_t` holds each task's max_epochs. Each task's `AsyncHyperBandScheduler` is made on the
    task's first trial, with the metric and mode Tune passed to `set_search_properties`.
    Trials run in the order they were added (FIFO)."""

    def __init__(
        self, max_t: Mapping[str, int], grace_period: int = 1, reduction: float = 4.0
    ) -> None:
        super().__init__()
        self._max_t = dict(max_t)
        self._grace_period = grace_period
        self._reduction = reduction
        self._mode: str | None = None
        self._by_task: dict[str, AsyncHyperBandScheduler] = {}

    def set_search_properties(self, metric: str | None, mode: str | None, **spec: Any) -> bool:
        if (self._metric and metric) or (self._mode and mode):
            return False
        self._metric = metric or self._metric
        self._mode = mode or self._mode
        return all(s.set_search_properties(metric, mode, **spec) for s in self._by_task.values())

    def for_trial(self, trial: Trial) -> AsyncHyperBandScheduler:
        """The ASHA of the trial's task."""
        task = str(trial_point(trial.config)[TASK_KEY])
        if task not in self._by_task:
            max_t = self._max_t[task]
            self._by_task[task] = AsyncHyperBandScheduler(
                time_attr=TIME_ATTR,
                metric=self._metric,
                mode=self._mode,
                max_t=max_t,
                grace_period=min(self._grace_period, max_t),
                reduction_factor=self._reduction,
                stop_last_trials=False,  # a trial at max_t still has its final report to send
            )
        return self._by_task[task]

    def on_trial_add(self, tune_controller: Any, trial: Trial) -> None:
        self.for_trial(trial).on_trial_add(tune_controller, trial)

    def on_trial_error(self, tune_controller: Any, trial: Trial) -> None:
        self.for_trial(trial).on_trial_error(tune_controller, trial)

    def on_trial_result(self, tune_controller: Any, trial: Trial, result: dict) -> str:
        return self.for_trial(trial).on_trial_result(tune_controller, trial, result)

    def on_trial_complete(self, tune_controller: Any, trial: Trial, result: dict) -> None:
        self.for_trial(trial).on_trial_complete(tune_controller, trial, result)

    def on_trial_remove(self, tune_controller: Any, trial: Trial) -> None:
        self.for_trial(trial).on_trial_remove(tune_controller, trial)

    def debug_string(self) -> str:
        parts = [f"{task}: {s.debug_string()}" for task, s in sorted(self._by_task.items())]
        return "\n".join(["Using ASHA per task."] + parts)


@dataclass(frozen=True)
class SearchSpace:
    """What a searcher picks per trial: a reduction factor and a learning rate."""

    reduction_factors: tuple[int, ...]
    learning_rates: tuple[float, ...]
    learning_rate_range: tuple[float, float] | None = None  # log-uniform when set

    @classmethod
    def of(cls, stage: AdapterStage) -> SearchSpace:
        return cls(stage.reduction_factors, stage.learning_rates, stage.learning_rate_range)

    def optuna(self) -> dict[str, Any]:
        from optuna.distributions import CategoricalDistribution, FloatDistribution

        if self.learning_rate_range is not None:
            learning_rate = FloatDistribution(*self.learning_rate_range, log=True)
        else:
            learning_rate = CategoricalDistribution(self.learning_rates)
        return {
            "reduction_factor": CategoricalDistribution(self.reduction_factors),
            "learning_rate": learning_rate,
        }


class PerTaskSearcher(_PickledState, Searcher):
    """One Optuna study per task, `num_samples` trials each, the tasks taken in turn.

    A suggestion carries the task, the trial's number within its task (`sample`, part of the
    trial id) and its seed: the seeds are used in turn. Results go to the study of the trial's
    task only. Each study's sampler is seeded from the task name, so suggestions repeat."""

    def __init__(
        self,
        tasks: Sequence[str],
        num_samples: int,
        space: SearchSpace,
        seeds: Sequence[int] = (0,),
        metric: str | None = None,
        mode: str | None = None,
    ) -> None:
        super().__init__(metric=metric, mode=mode)
        self._tasks = tuple(tasks)
        self._num_samples = num_samples
        self._space = space
        self._seeds = tuple(seeds)
        self._issued = dict.fromkeys(self._tasks, 0)
        self._turn = 0
        self._task_of: dict[str, str] = {}  # Tune's trial id -> task
        self._by_task: dict[str, Any] = {}  # task -> OptunaSearch

    def set_search_properties(
        self, metric: str | None, mode: str | None, config: dict, **spec: Any
    ) -> bool:
        if self._by_task:
            return False
        self._metric = metric or self._metric
        self._mode = mode or self._mode
        return True

    def study_of(self, task: str) -> Any:
        """The task's `OptunaSearch`."""
        if task not in self._by_task:
            import optuna
            from ray.tune.search.optuna import OptunaSearch

            optuna.logging.set_verbosity(optuna.logging.WARNING)
            self._by_task[task] = OptunaSearch(
                self._space.optuna(),
                metric=self._metric,
                mode=self._mode,
                study_name=f"adapterfleet-{task}",
                seed=zlib.crc32(task.encode()),
            )
        return self._by_task[task]

    def next_task(self) -> str | None:
        """The next task in turn with trials left to suggest."""
        count = len(self._tasks)
        for step in range(count):
            task = self._tasks[(self._turn + step) % count]
            if self._issued[task] < self._num_samples:
                self._turn = (self._turn + step + 1) % count
                return task
        return None

    def suggest(self, trial_id: str) -> dict | str | None:
        task = self.next_task()
        if task is None:
            return Searcher.FINISHED
        sample = self._issued[task]
        params = self.study_of(task).suggest(trial_id)
        self._issued[task] += 1
        self._task_of[trial_id] = task
        seed = self._seeds[sample % len(self._seeds)]
        return {TASK_KEY: task, SAMPLE_KEY: sample, "seed": seed, **params}

    def on_trial_result(self, trial_id: str, result: dict) -> None:
        if trial_id in self._task_of:
            self.study_of(self._task_of[trial_id]).on_trial_result(trial_id, result)

    def on_trial_complete(
        self, trial_id: str, result: dict | None = None, error: bool = False
    ) -> None:
        if trial_id in self._task_of:
            study = self.study_of(self._task_of[trial_id])
            study.on_trial_complete(trial_id, result=result, error=error)


def tune_options(config: PipelineConfig, tasks: Sequence[str]) -> dict[str, Any]:
    """The `TuneConfig` arguments of the sweep of `tasks`: the sample count, and the metric,
    mode, searcher and scheduler when the config asks for optuna or ASHA."""
    stage = config.adapters
    options: dict[str, Any] = {"num_samples": 1}
    if stage.search == "grid" and stage.scheduler == "fifo":
        return options
    metric = OBJECTIVE_KEY  # each trial's own task's metric, higher-is-better (spec.py)
    options.update(metric=metric, mode=MODE)
    if stage.search == "optuna":
        options["num_samples"] = stage.num_samples * len(tasks)
        options["search_alg"] = PerTaskSearcher(
            tasks, stage.num_samples, SearchSpace.of(stage), stage.seeds, metric, MODE
        )  # given the metric here: Tune skips set_search_properties for an empty param_space
    if stage.scheduler == "asha":
        max_t = {task: stage.training_for(task).max_epochs for task in tasks}
        options["scheduler"] = PerTaskScheduler(
            max_t, stage.asha_grace_period, stage.asha_reduction
        )
    return options
