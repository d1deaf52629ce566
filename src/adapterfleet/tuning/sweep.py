"""One Tune experiment for the adapter stage of every pending task: build or restore, fit,
register. Needs a running Ray (`ray.init`) and the sweep runs opened by the caller.

The trials are the grid of `param_space`, or with `adapters.search: optuna` the suggestions of
a per-task searcher; `adapters.scheduler: asha` stops trials early, per task (tuning/search.py).
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import ray
import ray.tune

from adapterfleet.adapters import load_tokenizer
from adapterfleet.config import PipelineConfig
from adapterfleet.console import Say, plural
from adapterfleet.data import TaskData, TokenizedTask, load_task, tokenize_task
from adapterfleet.data.baseline import Chance, dev_chance
from adapterfleet.disk import watch_library_logs
from adapterfleet.registry import MlflowRunLogger, ModelVersionInfo
from adapterfleet.tuning.checkpoints import refill_deleted_checkpoints
from adapterfleet.tuning.outcomes import outcome_of_result
from adapterfleet.tuning.plan import SweepPlan, place_experiment, write_meta
from adapterfleet.tuning.progress import Note
from adapterfleet.tuning.registration import (
    Registrar,
    RegistrationCallback,
    TaskPlan,
    activate,
)
from adapterfleet.tuning.search import tune_options
from adapterfleet.tuning.spec import (
    POINT_KEY,
    RAY_DIR,
    SweepContext,
    SweepError,
    TrialsFailed,
    grid,
    trials_root,
)
from adapterfleet.tuning.trial import make_trainable

DEFAULT_MAX_FAILURES = 2
DRIVER_MEMORY = 256 * 2**20  # bytes a multi-worker trial's driver reserves
CUT_NOTE_FROM = 0.01  # the share of training rows cut at max_length that the task line says


def worker_config(config: PipelineConfig) -> PipelineConfig:
    """`config` with a local base model folder as an absolute path (its storage is absolute
    already): trials run in a working directory of Tune's."""
    base_model = config.base_model
    if os.path.isdir(base_model) and not os.path.isabs(base_model):
        base_model = str(Path(base_model).resolve())
    return dataclasses.replace(config, base_model=base_model)


def param_space(config: PipelineConfig, tasks: tuple[str, ...]) -> dict[str, object]:
    """The grid; empty when a searcher suggests every trial's settings. With per-task grids
    (`adapters.task_grid`) the points are listed one by one under `POINT_KEY`: a product of
    independent axes cannot give tasks different values."""
    stage = config.adapters
    if stage.search != "grid":
        return {}
    if stage.task_grid:
        points = [params.to_config() for params in grid(config, tasks)]
        return {POINT_KEY: ray.tune.grid_search(points)}
    return {
        "task": ray.tune.grid_search(list(tasks)),
        "reduction_factor": ray.tune.grid_search(list(stage.reduction_factors)),
        "learning_rate": ray.tune.grid_search(list(stage.learning_rates)),
        "seed": ray.tune.grid_search(list(stage.seeds)),
    }


def task_plans(plan: SweepPlan, sweep_runs: Mapping[str, MlflowRunLogger]) -> dict[str, TaskPlan]:
    """What registration waits for per task: the grid's trial ids, or the searcher's count."""
    stage = plan.config.adapters
    ids: dict[str, set[str]] = {task: set() for task in plan.pending}
    if stage.search == "grid":
        for params in grid(plan.config, plan.pending):
            ids[params.task].add(params.trial_id)
    samples = stage.num_samples if stage.search != "grid" else 0
    return {
        task: TaskPlan(
            task, plan.model_name(task), plan.config_hashes[task], frozenset(ids[task]),
            sweep_runs.get(task), samples, plan.data_hashes.get(task),
        )
        for task in plan.pending
    }  # fmt: skip


def prepare_data(
    ctx: SweepContext, tasks: tuple[str, ...], progress: Say, loaded: Mapping[str, TaskData]
) -> dict[str, Chance | None]:
    """Tokenise every task once into the shared cache the trials read; returns each task's
    dev chance level (what learning nothing scores), which its registration line is held against.
    A task in `loaded` (validation's) is not read again: each read says its data warnings
    (skipped rows, ...)."""
    tokenizer = load_tokenizer(ctx.config.base_model)
    chances = {}
    for task in tasks:
        data = loaded.get(task) or load_task(ctx.config.tasks[task])
        tokenized = tokenize_task(data, tokenizer, ctx.config.max_length, ctx.tokens_dir)
        state = "cached" if tokenized.from_cache else "tokenised"
        progress(
            f"task {task}: {len(tokenized.train)} train / {len(tokenized.dev)} dev, {state}"
            + cut_note(tokenized)
        )
        chances[task] = dev_chance(tokenized)
    return chances


def cut_note(tokenized: TokenizedTask) -> str:
    """`; 23% of the training rows are cut at max_length 128 (...)`, from 1% of them up; else ""."""
    share = tokenized.cut_share
    if share < CUT_NOTE_FROM:
        return ""
    return (
        f"; {share:.0%} of the training rows are cut at max_length {tokenized.max_length} "
        "(a larger max_length keeps their ends, at more time per step)"
    )


def trial_resources(config: PipelineConfig) -> dict[str, float]:
    """What a Tune trial reserves: the config's resources; for a trial of several workers no
    CPU or GPU (its driver only waits; Ray Train reserves the workers), only the memory of its
    process (Ray refuses a trial that reserves nothing)."""
    resources = config.resources
    if resources.distributed:
        return {"cpu": 0, "memory": DRIVER_MEMORY}
    return {"cpu": resources.cpu, "gpu": resources.gpu}


def concurrent_trials(config: PipelineConfig) -> dict[str, int]:
    """`max_concurrent_trials`: `resources.max_concurrent_trials` where given (a share of a
    cluster others use too); for trials of several workers at most as many as the cluster can
    place at once (Tune does not see their workers' resources, so it would start every
    driver); nothing for one-worker trials, which Tune places itself."""
    resources = config.resources
    limit = resources.max_concurrent_trials
    if not resources.distributed:
        return {} if limit is None else {"max_concurrent_trials": limit}
    nodes = [node["Resources"] for node in ray.nodes() if node.get("Alive")]
    slots = max(1, sum(resources.fitting(node) for node in nodes) // resources.workers)
    return {"max_concurrent_trials": slots if limit is None else min(slots, limit)}


def build_tuner(
    plan: SweepPlan, trainable: object, *, max_failures: int, verbose: int
) -> ray.tune.Tuner:
    path = plan.experiment_path
    if plan.restore:
        refill_deleted_checkpoints(path)
        return ray.tune.Tuner.restore(
            str(path), trainable, resume_unfinished=True, resume_errored=True
        )
    tuner = ray.tune.Tuner(
        trainable,
        param_space=param_space(plan.config, plan.pending),
        tune_config=ray.tune.TuneConfig(
            reuse_actors=True,
            **tune_options(plan.config, plan.pending),
            **concurrent_trials(plan.config),
        ),
        run_config=ray.tune.RunConfig(
            name=plan.config.name,
            storage_path=str(plan.config.storage / RAY_DIR),
            failure_config=ray.tune.FailureConfig(max_failures=max_failures),
            checkpoint_config=ray.tune.CheckpointConfig(num_to_keep=2),
            callbacks=[RegistrationCallback(plan.sweep_name), *tune_loggers()],
            verbose=verbose,
        ),
    )
    write_meta(plan)
    return tuner


# Tune's own output off: its legacy engine, which at verbosity 0 prints nothing (the new one
# prints the configuration box and a TensorBoard hint whatever the verbosity), and no hint to
# snapshot less often when short epochs checkpoint often (our trials keep two checkpoints).
QUIET_TUNE = {
    "RAY_AIR_NEW_OUTPUT": "0",
    "TUNE_WARN_EXCESSIVE_EXPERIMENT_CHECKPOINT_SYNC_THRESHOLD_S": "0",
}


# Tune's CSV and JSON logs of each trial (`progress.csv`, `result.json`), given in `build_tuner`,
# and not its TensorBoard one. That one hands each result to a writer thread through a
# multiprocessing queue; a Ctrl-C landing just after `put` took the queue's lock kept it held,
# and the CLI's exit, flushing that writer, waited on it for a minute. MLflow has the metrics.
OWN_LOGGERS = {"TUNE_DISABLE_AUTO_CALLBACK_LOGGERS": "1"}


def tune_loggers() -> list[ray.tune.Callback]:
    from ray.tune.logger import CSVLoggerCallback, JsonLoggerCallback

    return [CSVLoggerCallback(), JsonLoggerCallback()]


# Ctrl-C raises KeyboardInterrupt in the driver, as a kill would end it (the sweep's MLflow runs
# end KILLED, a later run resumes), rather than Tune's own handler, which ends `fit()` early as
# if the sweep were done and hands back results of trials that never started.
OWN_SIGINT = {"TUNE_DISABLE_SIGINT_HANDLER": "1"}


@contextmanager
def tune_output(verbose: int) -> Iterator[None]:
    """Tune's own console output while the block runs: none at `verbose` 0 (`QUIET_TUNE`); our
    lines come from `RegistrationCallback` either way. Ctrl-C is ours (`OWN_SIGINT`), and so is
    the choice of Tune's loggers (`OWN_LOGGERS`). A full disk that MLflow or Tune logs from now
    on is noted instead (`disk.NOTES`): it stops the sweep."""
    watch_library_logs().take()
    settings = {**({} if verbose else QUIET_TUNE), **OWN_SIGINT, **OWN_LOGGERS}
    before = {name: os.environ.get(name) for name in settings}
    os.environ.update(settings)
    # a resumed sweep's trials that had reported nothing yet: "Failed to fetch metrics ..."
    analysis = logging.getLogger("ray.tune.analysis.experiment_analysis")
    level = analysis.level
    if not verbose:
        analysis.setLevel(logging.ERROR)
    try:
        yield
    finally:
        analysis.setLevel(level)
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def fit_or_kill(tuner: ray.tune.Tuner) -> ray.tune.ResultGrid:
    """`tuner.fit()`; stopped by Ctrl-C, its trials killed before the KeyboardInterrupt goes on."""
    try:
        return tuner.fit()
    except BaseException as error:
        if not isinstance(error, Exception):  # Tune ends its trials itself after an Exception
            kill_trials_of(error)
        raise


def kill_trials_of(stop: BaseException) -> None:
    """Kill the trials of the Tune run that `stop` (Ctrl-C's KeyboardInterrupt) ended, and
    free their placement groups. Tune does that after an Exception, not after a
    KeyboardInterrupt: in a process that stays in Ray (a notebook's) its trials trained on and
    held their CPUs as long as the traceback lived, which IPython keeps, so the next sweep
    waited for resources for good. Tune holds its controller only in the frames of `tune.run`,
    so it is taken from the traceback. The trials' MLflow runs stay RUNNING, for
    `mark_interrupted` to end KILLED; a trial's checkpoints are complete or ignored."""
    from ray.tune.execution.tune_controller import TuneController

    trace = stop.__traceback__
    while trace is not None:
        controller = trace.tb_frame.f_locals.get("runner")
        if isinstance(controller, TuneController):
            with contextlib.suppress(Exception):  # Ray left meanwhile: nothing left to kill
                # ray.kill, then the resources freed: private in the pinned Ray (2.60);
                # tests/tuning/test_tuning_interrupt.py fails if a Ray upgrade moves it
                controller._actor_manager.cleanup()
            return
        trace = trace.tb_next


def run_sweep(
    plan: SweepPlan,
    sweep_runs: Mapping[str, MlflowRunLogger],
    *,
    progress: Say = print,
    max_failures: int = DEFAULT_MAX_FAILURES,
    verbose: int = 0,
    note: Note | None = None,
    loaded: Mapping[str, TaskData] | None = None,
) -> dict[str, ModelVersionInfo]:
    """Run (or resume) the sweep of `plan.pending`; return the registered version per task.
    `verbose`: Tune's verbosity (0: Tune prints nothing, every line is ours); `note`: what the
    caller adds to the trial counts of each epoch line; `loaded`: tasks the caller loaded
    already (validation), not read again.

    Raises `SweepError` (with `.registered`) when a task's trials failed for good."""
    if not plan.pending:
        return dict(plan.registered)
    if not ray.is_initialized():
        raise SweepError("Ray is not running; call ray.init() (or run_adapter_stage) first")
    config = worker_config(plan.config)
    resources = config.resources
    ctx = SweepContext(
        config,
        plan.tracking_uri,
        plan.experiment_id,
        plan.sweep_name,
        {task: run.run_id for task, run in sweep_runs.items()},
        cpu=resources.cpu,
    )
    chances = prepare_data(ctx, plan.pending, progress, loaded or {})
    tasks = task_plans(plan, sweep_runs)
    registrar = Registrar(
        plan.tracking_uri, plan.config, plan.sweep_name,
        trials_root(config, plan.sweep_name), tasks, progress, note, chances=chances,
    )  # fmt: skip
    trainable = make_trainable(ctx, trial_resources(config))
    with activate(registrar):
        verb = "resuming" if plan.restore else "starting"
        trials = sum(task.size for task in tasks.values())
        counts = f"{plural(len(plan.pending), 'task')}, {plural(trials, 'trial')}"
        moved = place_experiment(plan)
        if moved is not None:
            progress(f"sweep {plan.sweep_name}: {moved}")
        progress(f"sweep {plan.sweep_name}: {verb}, {counts}")
        with tune_output(verbose):
            tuner = build_tuner(plan, trainable, max_failures=max_failures, verbose=verbose)
            results = fit_or_kill(tuner)
        # a trial that never started has no config: its task is then among the unfinished
        registrar.observe([outcome_of_result(result) for result in results if result.config])
    registered = {**plan.registered, **registrar.registered}
    unfinished = [t for t in plan.pending if t not in registered and t not in registrar.failed]
    failed = {**registrar.failed, **{t: "trials did not finish" for t in unfinished}}
    if failed:
        detail = "; ".join(f"{task}: {why}" for task, why in sorted(failed.items()))
        mend = "fix the cause and resume the sweep"
        if set(failed) <= registrar.diverged:  # a resume fails them again at once
            mend = "lower the learning rates (adapters.learning_rates, task_grid) and run again"
        raise TrialsFailed(f"sweep {plan.sweep_name}: {detail}; {mend}", registered)
    return registered
