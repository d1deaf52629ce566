"""Stage 1 of the pipeline: the adapter sweep of every task, registered in MLflow.

`run_adapter_stage` resolves and checks the tracking store, decides what is left to do (tasks
registered for their current settings are skipped, an interrupted sweep is resumed), starts or
joins Ray only when there is work, opens one sweep run per task and runs the sweep.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import signal
import sys
import threading
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass

from adapterfleet.config import ConfigError, PipelineConfig, require_config
from adapterfleet.console import Level, Say
from adapterfleet.data import TaskData
from adapterfleet.disk import is_disk_full, low_space, stops_when_full
from adapterfleet.orchestration.pipeline_tags import command_tags
from adapterfleet.orchestration.ray_address import check_ray_address, not_joined
from adapterfleet.orchestration.relay import console, ray_log_level
from adapterfleet.registry import (
    MlflowRunLogger,
    ModelVersionInfo,
    ensure_experiment,
    get_version,
    open_sweep_run,
    set_alias,
)
from adapterfleet.registry.descriptions import TAG_NOTE
from adapterfleet.registry.heartbeat import heartbeat
from adapterfleet.registry.info import made_by
from adapterfleet.registry.interrupted import (
    clear_interrupted,
    end_orphaned_runs,
    mark_interrupted,
    mark_unanswered,
)
from adapterfleet.registry.purged import purged_text
from adapterfleet.registry.store import check_store, login_env, missing_store
from adapterfleet.registry.sweep_run import finish_sweep_run
from adapterfleet.registry.tags import BEST_ALIAS, TAG_CONFIG_HASH, TAG_SWEEP
from adapterfleet.results.status import pipeline_status
from adapterfleet.training import end_quietly
from adapterfleet.tuning.plan import SweepPlan, check_resumable, plan_sweep
from adapterfleet.tuning.settings import changed_text, say_taken
from adapterfleet.tuning.spec import (
    registered_summary,
    sweep_description,
    task_config_hash,
    task_config_hashes,
)

# an address `ensure_ray` was given (a host name, "auto") -> the GCS address of what it joined
_joined: dict[str, str] = {}


def ensure_ray(address: str | None, num_cpus: int | None, log_level: int | None = None) -> None:
    """Join the Ray cluster at `address` ("auto", host:port, ray://...); with no address, the
    cluster of RAY_ADDRESS (as inside a submitted job), else a new local Ray of this process,
    never some other cluster that happens to run on the machine. Nothing if Ray is running
    (an address of another cluster is refused then: `check_same_cluster`).
    `log_level`: of the driver's "ray" logger (None: Ray's INFO); below INFO, what Ray logs
    while it starts (its INFO lines, its notices) stays in its log files. A SIGTERM handler of
    this process's own (the CLI's: stop as on Ctrl-C) stays in place of Ray's."""
    import ray
    from ray.util.client import ray as ray_client

    if ray.is_initialized():
        check_same_cluster(address)
        cpus = ray.cluster_resources().get("CPU") if num_cpus is not None else None
        if cpus is not None and cpus != num_cpus:  # a notebook's call again, to go gentler
            warnings.warn(
                f"num_cpus={num_cpus} is not applied: this process is already in Ray, of "
                f"{cpus:g} CPUs; call ray.shutdown() first for a local Ray of {num_cpus}",
                stacklevel=3,
            )
        if log_level is not None:
            logging.getLogger("ray").setLevel(log_level)
        return
    joined = address not in (None, "local")  # given here, not inherited by a submitted job
    if address is None and os.environ.get("RAY_ADDRESS"):
        address = os.environ["RAY_ADDRESS"]
    local = address in (None, "local")
    if not local:
        check_ray_address(str(address))
    # the workers of a cluster joined from here do not inherit this process's MLflow login
    login = login_env() if joined else {}
    ours = signal.getsignal(signal.SIGTERM) if _main_thread() else None
    try:
        ray.init(
            address="local" if local else address,
            include_dashboard=False,
            num_cpus=num_cpus if local else None,
            logging_level=logging.INFO if log_level is None else max(log_level, logging.ERROR),
            runtime_env={"env_vars": login} if login else None,
        )
    except (ConnectionError, RuntimeError) as error:
        if local:
            raise
        raise ConfigError(not_joined(str(address), error)) from None
    if not local and not ray_client.is_connected():
        _joined[str(address).rstrip("/")] = ray.get_runtime_context().gcs_address
    if callable(ours):  # Ray's exits at once, after its core worker's stack dump
        signal.signal(signal.SIGTERM, ours)
    if log_level is not None:
        logging.getLogger("ray").setLevel(log_level)


def check_same_cluster(address: str | None) -> None:
    """In a process already in Ray (a notebook's `ray.init`, an earlier run), a host:port
    `address` must be that cluster's: it used to be ignored, and the run went to the cluster
    the process was in. None, "local" and "auto" take the running one; so does a ray://
    address while Ray Client is connected (its server's address is not known here)."""
    import ray
    from ray.util.client import ray as ray_client

    if address in (None, "local", "auto"):
        return
    if address.startswith("ray://") and ray_client.is_connected():
        return
    given = address.rstrip("/")
    current = None if ray_client.is_connected() else ray.get_runtime_context().gcs_address
    if current is not None and current in (given, _joined.get(given)):
        return
    raise ConfigError(
        f"ray address {address!r}: this process is already in Ray "
        f"({current or 'through Ray Client'}); leave the address out to run there, or call "
        "ray.shutdown() first"
    )


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def ray_initialized() -> bool:
    import ray

    return bool(ray.is_initialized())


def stop_ray() -> None:
    """Leave Ray now if this process joined or started it (a local cluster stops), so the
    lines its workers still print come before the caller's last words, not after them."""
    if "ray" in sys.modules and sys.modules["ray"].is_initialized():
        sys.modules["ray"].shutdown()


def cancel_while_joined(ref: object) -> None:
    """Cancel the Ray task of `ref` if this process is still in Ray. After Ctrl-C the driver
    has left Ray (`stop_ray`) by the time a thread sees its `ray.get` fail; a Ray call from
    that thread would then start a new local Ray (Ray's auto-init) in a process on its way out."""
    import ray

    if ray.is_initialized():
        with contextlib.suppress(Exception):  # Ray leaving meanwhile: nothing left to cancel
            ray.cancel(ref, force=True)


def note_interrupted(config: PipelineConfig) -> bool:
    """After Ctrl-C or SIGTERM, once Ray is left (`stop_ray`): tag the pipeline's experiment and
    end KILLED the runs this driver's jobs left open, so that `status` calls them interrupted
    rather than running or failed (the next run reopens them). False when the store did not
    answer within `MARK_TIMEOUT_S` (then, and for the rest of this interruption, it is not
    waited for: an MLflow server that is down held Ctrl-C for minutes)."""
    mark_interrupted(config.tracking_uri, config.name)
    return not mark_unanswered(config.tracking_uri, config.name)


def run_adapter_stage(
    config: PipelineConfig,
    *,
    resume: bool | None = None,
    ray_address: str | None = None,
    num_cpus: int | None = None,
    max_failures: int | None = None,
    progress: Say = print,
    level: Level = Level.DEFAULT,
    note: Callable[[], str] | None = None,
    loaded: Mapping[str, TaskData] | None = None,
    overrides: Sequence[str] | None = None,
    watch: SweepWatch | None = None,
) -> dict[str, ModelVersionInfo]:
    """Sweep, pick and register the adapter of every task; the `@best` version per task.

    `resume`: None resumes an interrupted sweep of the same settings when there is one, True
    insists on resuming, False starts a new sweep. Tasks whose adapter is registered for their
    current settings are never trained again. `ray_address`: None or "local" starts a local
    Ray (with `num_cpus`), "auto" or host:port joins a cluster. Raises `SweepError` when trials
    failed for good (its `.registered` holds the tasks that did get registered).
    `level`: how much it prints besides `progress` (`relay.console`); `note`: appended to the
    trial counts of each epoch line; `loaded`: the tasks validation loaded, not read again;
    `overrides`: the command line's `-o` (None: not known), recorded on a new sweep's runs (a
    command of other settings names them to continue it); `watch`: told the tasks it trains."""
    from adapterfleet.tuning.sweep import DEFAULT_MAX_FAILURES, run_sweep  # imports ray

    config = require_config(config)  # a path given here was an AttributeError
    with console(level, progress) as relay, ExitStack() as alive, stops_when_full(config.storage):
        uri = config.tracking_uri
        check_store(uri, say=progress)
        if resume and missing_store(uri) is not None:  # refused before the store is created
            check_resumable(config, uri)
        experiment_id = ensure_experiment(uri, config.name, say=progress)
        alive.enter_context(heartbeat(uri, experiment_id, progress, sweep=True))  # and `status`
        _end_orphans(uri, experiment_id, progress)
        plan = plan_sweep(config, uri, experiment_id, resume=resume)
        _say_planned(plan, uri, progress)  # an interrupted sweep of other settings: said once
        if not plan.pending:
            return dict(plan.registered)
        ensure_ray(ray_address, num_cpus, ray_log_level(level))
        relay.attach()
        started = {} if plan.restore or overrides is None else command_tags(config, overrides)
        sweep_runs = _open_sweep_runs(config, uri, experiment_id, plan, started)
        if watch is not None:
            watch.tasks = tuple(plan.pending)
        try:
            return run_sweep(
                plan,
                sweep_runs,
                progress=progress,
                max_failures=DEFAULT_MAX_FAILURES if max_failures is None else max_failures,
                verbose=1 if level >= Level.VERBOSE else 0,
                note=note,
                loaded=loaded,
            )
        except BaseException as error:
            _end_sweep_runs(error, config, sweep_runs.values(), progress)
            raise


def _end_sweep_runs(
    error: BaseException, config: PipelineConfig, runs: Iterable[MlflowRunLogger], say: Say
) -> None:
    """The sweep runs `error` ended. Stopped (Ctrl-C; a full disk too: it goes on once there is
    space), they end KILLED with the interruption's mark, within seconds (ended one by one, each
    waited on through MLflow's retries, a server that was down held Ctrl-C for minutes), as the
    CLI's `resumable` does, for a caller from Python (a notebook); else FAILED."""
    if isinstance(error, KeyboardInterrupt) or is_disk_full(error):
        note_interrupted(config)
        return
    for run in runs:
        if run.ended is None:  # a task registered (or given up) before it ended its run
            end_quietly(run, "FAILED", say)


def _end_orphans(uri: str, experiment_id: str, progress: Say) -> None:
    """End KILLED what a driver killed at once left RUNNING, and say so."""
    for driver, count in end_orphaned_runs(uri, experiment_id).items():
        host, _, pid = driver.partition(" ")
        runs = f"{count} run{'s' if count > 1 else ''}"
        progress(
            f"ended KILLED {runs} that process {pid} on {host}, a driver no longer running, "
            "left RUNNING (a run with their settings goes on from their checkpoints)"
        )


def _say_planned(plan: SweepPlan, uri: str, progress: Say) -> None:
    """What the plan skips and what it trains again; a version found for the current settings
    and data but not under @best (a config changed back) gets @best again. The interrupted
    mark comes off once said (not another storage's)."""
    if plan.interrupted is not None:
        progress(plan.interrupted.line())
    if plan.interrupted is None or not plan.interrupted.elsewhere:  # another config's: kept
        clear_interrupted(uri, plan.experiment_id)  # its runs are running again, or it was said
    for task, info in plan.registered.items():
        if info.tags.get(TAG_SWEEP):  # its sweep's run, left open by a driver stopped mid-finish
            summary = functools.partial(registered_summary, plan.config, task, info)
            finish_sweep_run(uri, plan.experiment_id, info.tags[TAG_SWEEP], task, summary)
        other = made_by(info.tags, plan.config.name)  # a shared registry_prefix
        by = f" by pipeline '{other}'" if other else ""
        said = f"task {task}: already registered as {info.name} v{info.version}{by}, skipped"
        was = None
        if BEST_ALIAS not in info.aliases:  # settings or data changed back to its own
            was = get_version(uri, info.name, alias=BEST_ALIAS)
            set_alias(uri, info.name, BEST_ALIAS, info.version)
            plan.registered[task] = get_version(uri, info.name, alias=BEST_ALIAS) or info
            said += f"; it was trained for these settings and data: @best is v{info.version}"
            if was is not None and task in plan.purged:
                said += f" again (it was on v{was.version}, whose run mlflow gc purged)"
            elif was is not None:  # e.g. another user's run of the same pipeline name
                said += f" again (it was on v{was.version}, registered for other settings or data)"
        progress(said)
        if was is not None and task not in plan.purged:  # another pipeline's, or a better one
            say_taken(progress, task, plan.config, was, plan.registered[task])
    if plan.lost is not None:
        name, where = plan.lost
        state = "is incomplete" if where.exists() else "is gone"
        progress(
            f"the interrupted sweep {name} cannot be resumed: its saved state ({where}) {state};"
            " its tasks start in a new sweep, trials it had finished too"
        )
    for task, info in plan.purged.items():
        if task in plan.pending:
            registered = f"{info.name} v{info.version} is registered"
            progress(f"task {task}: {registered}, but {purged_text(info)}; training it again")
    # resumed: an earlier run began training it for the settings and data it has now
    again = "its interrupted sweep goes on" if plan.restore else "training it again"
    for task, info in plan.changed.items():
        progress(
            f"task {task}: its data files changed since {info.name} v{info.version} was "
            f"registered for these settings; {again}"
        )
    for task, (info, changes) in plan.resettled.items():
        if task in plan.pending:
            progress(
                f"task {task}: its settings changed since {info.name} v{info.version} was "
                f"registered{changed_text(changes)}; {again}"
            )


def _open_sweep_runs(
    config: PipelineConfig, uri: str, experiment_id: str, plan: SweepPlan, started: dict
) -> dict[str, MlflowRunLogger]:
    """The parent run of each task's sweep (reopened on resume), with the grid it searches;
    `started`: the `-o` and `--budget` a new sweep was started with (`command_tags`)."""
    stage, sweep_name = config.adapters, plan.sweep_name
    runs = {}
    for task in plan.pending:
        tags = {
            TAG_CONFIG_HASH: task_config_hash(config, task),
            "base_model": config.base_model,
            TAG_NOTE: sweep_description(config, task, sweep_name),
            **started,
        }
        runs[task] = open_sweep_run(uri, experiment_id, sweep_name, task, tags=tags)
        points = stage.grid_for(task)
        runs[task].log_new_params(  # a reopened run keeps what it was logged with
            {
                "architecture": stage.architecture,
                "reduction_factors": list(points.reduction_factors),
                "learning_rates": list(points.learning_rates),
                "seeds": list(stage.seeds),
                "metric": stage.training_for(task).metric,
                "max_epochs": stage.training_for(task).max_epochs,  # what its trials use
            }
        )
    return runs


def resume_sweep(
    config: PipelineConfig,
    *,
    ray_address: str | None = None,
    num_cpus: int | None = None,
    max_failures: int | None = None,
    progress: Say = print,
    level: Level = Level.DEFAULT,
) -> dict[str, ModelVersionInfo]:
    """`run_adapter_stage` with `resume=True`: continue the interrupted sweep of `config`,
    not on a disk too full for it (`disk.low_space`)."""
    problem = low_space(config.storage)
    if problem is not None:
        raise ConfigError(f"storage: {problem}")
    return run_adapter_stage(
        config,
        resume=True,
        ray_address=ray_address,
        num_cpus=num_cpus,
        max_failures=max_failures,
        progress=progress,
        level=level,
    )


@dataclass
class SweepWatch:
    """The tasks this run's sweep trains, once their runs are open (None before), for the
    fusion gates and the baselines' launcher: the store alone took a finished sweep of earlier
    settings for it (a fusion's job took a CPU before the trials, which ran one at a time)."""

    tasks: tuple[str, ...] | None = None

    def all_started(self, config: PipelineConfig, uri: str) -> bool:
        """Every planned trial of this sweep's tasks has a run: none waits for a slot."""
        if not self.tasks:
            return False
        hashes = {task: task_config_hashes(config, task) for task in self.tasks}
        rows = [
            row for row in pipeline_status(config, uri, None, hashes).tasks if row.task in hashes
        ]
        return bool(rows) and all(row.pending == 0 for row in rows)
