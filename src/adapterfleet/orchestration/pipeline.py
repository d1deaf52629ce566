"""`adapterfleet run`: validate, run the adapter sweep (each task tokenised once) and the fusions.

Each fusion target has a gate thread in the driver that polls the registry; as soon as every
adapter the target needs has its `best` alias, the fusion is submitted as a Ray task with the
config's per-trial resources, so it starts while other tasks' sweeps are still running.

Warm starts, so that a fusion takes its first step seconds after its last adapter is registered
instead of after a worker's start, imports and model load (about 12 s on 2 cores):
- on CPU, one fusion whose adapters are those of every swept task is submitted when the
  pipeline starts, reserving no CPU: it imports, tokenises and loads the base model while the
  sweep runs, then polls the registry. Its adapters registered means every trial has ended, so
  it trains on the slots the sweep left; it costs one idle process (~1 GiB) meanwhile;
- any other fusion is submitted, warm and with its resources, once every trial of the sweep has
  started (no trial waits for a slot any more).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from adapterfleet.config import PipelineConfig, require_config
from adapterfleet.console import Level, Say, plural
from adapterfleet.data import TaskData
from adapterfleet.disk import DiskFullError, says_full, stops_when_full
from adapterfleet.errors import cause_text
from adapterfleet.orchestration.baselines import (
    BaselineLauncher,
    BaselineSummary,
    collect_baselines,
)
from adapterfleet.orchestration.fusion_job import FusionOutcome, registered_text, run_fusion_job
from adapterfleet.orchestration.fusion_plan import (
    current_adapter,
    open_plan_run,
    plan_fusion,
    seed_configs,
)
from adapterfleet.orchestration.limits import local_node
from adapterfleet.orchestration.pipeline_tags import pipeline_tags
from adapterfleet.orchestration.ray_address import check_ray_address
from adapterfleet.orchestration.relay import (
    WorkerRelay,
    WorkerSay,
    console,
    ray_log_level,
    relayed_remote,
)
from adapterfleet.orchestration.report_scope import report_scope
from adapterfleet.orchestration.sweep import (
    SweepWatch,
    cancel_while_joined,
    ensure_ray,
    note_interrupted,
    ray_initialized,
    run_adapter_stage,
)
from adapterfleet.orchestration.validate import check_resources, validate_pipeline
from adapterfleet.registry import (
    ModelVersionInfo,
    adapter_model_name,
    ensure_experiment,
    safe_uri,
    wait_for_models,
)
from adapterfleet.registry.heartbeat import heartbeat, refuse_second_driver_of
from adapterfleet.registry.store import check_store
from adapterfleet.registry.tags import BEST_ALIAS
from adapterfleet.results.report import ReportResult, build_report
from adapterfleet.tuning.plan import check_resumable
from adapterfleet.tuning.spec import TrialsFailed

GATES_STOP_S = 5.0  # after Ctrl-C: a gate polls the registry every 2 s at most


@dataclass
class PipelineSummary:
    name: str
    tracking_uri: str
    adapters: dict[str, ModelVersionInfo] = field(default_factory=dict)
    fusions: dict[str, FusionOutcome] = field(default_factory=dict)
    baselines: BaselineSummary = field(default_factory=BaselineSummary)
    report: ReportResult | None = None  # Table 1 and Figure 4, for a pipeline with baselines
    errors: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0


def _fusion_remote(config: PipelineConfig, reserve: bool = True) -> Any:
    """The fusion job as a Ray task; with `resources.workers` it only waits on its Ray Train
    workers, so it reserves no CPU or GPU of its own."""
    reserve = reserve and not config.resources.distributed
    options = {
        "num_cpus": config.resources.cpu if reserve else 0,
        "num_gpus": config.resources.gpu if reserve else 0,
        "max_retries": 2,
        "retry_exceptions": False,
    }
    return relayed_remote(run_fusion_job, **options)


class FusionGate(threading.Thread):
    """Waits in the driver for a target's adapters, then runs its fusion on Ray."""

    def __init__(
        self,
        config: PipelineConfig,
        target: str,
        uri: str,
        experiment_id: str,
        relay: WorkerRelay,
        timeout_s: float,
        start_now: bool = False,
        watch: SweepWatch | None = None,
    ):
        super().__init__(name=f"fusion-gate-{target}", daemon=True)
        config = replace(config, fusion=config.fusion.for_target(target))  # the target's metric
        self.config, self.target, self.uri, self.experiment_id = config, target, uri, experiment_id
        self.say, self.relay, self.timeout_s = relay.say, relay, timeout_s
        self.job = f"fusion {target}"  # names its lines for the relay
        self.state = "waiting"  # for adapters; then "training", "done" or "failed"
        self.outcome: FusionOutcome | None = None
        self.error: BaseException | None = None
        self.ref: Any = None  # the fusion job's ObjectRef once submitted
        self.start_now = start_now  # submit warm at once, reserving nothing (see the module)
        self.since = time.time()  # an adapter registered before is not waited for
        self.stop = threading.Event()
        self.watch = watch or SweepWatch()  # this run's sweep, not one of earlier settings

    def run(self) -> None:
        import ray

        sources = self.config.fusion.targets[self.target]
        tasks = {adapter_model_name(self.config.registry_prefix, t): t for t in sources}
        names = list(tasks)
        accept = current_adapter(self.config, tasks, self.uri)
        try:
            if self.start_now:
                self.ref = self._submit(warm=True, timeout_s=self.timeout_s, reserve=False)
            found = wait_for_models(
                self.uri, names, BEST_ALIAS, self.timeout_s, 1.0, self._progress, max_poll_s=2.0,
                accept=accept,
            )  # fmt: skip
            self.state = "training"  # on the versions this run's sweep keeps, not older ones
            if self.ref is None:
                self._open_run(found)
                self.ref = self._submit(warm=False, timeout_s=60.0)
            self.outcome = ray.get(self.ref)
            self.relay.settle(self.job)  # the job's own lines first
            metric, seeds = self.config.fusion.training.metric, len(seed_configs(self.config))
            self.say(f"fusion {self.target}: {registered_text(self.outcome, metric, seeds)}")
            self.state = "done"
        except BaseException as error:  # noqa: BLE001 - reported by the driver
            self.state = "failed"
            if self.ref is not None and self.outcome is None:
                cancel_while_joined(self.ref)
            self.error = error
            if line := fusion_failed_line(self.target, error, stopped=self.stop.is_set()):
                self.say(line)  # the footer's too

    def _submit(self, warm: bool, timeout_s: float, reserve: bool = True) -> Any:
        remote = _fusion_remote(self.config, reserve)
        args = (self.config, self.target, self.uri, self.experiment_id)
        return remote.remote(
            run_fusion_job, WorkerSay(self.job), *args, timeout_s=timeout_s, warm=warm,
            current_only=True, since=self.since,
        )  # fmt: skip

    def _open_run(self, found: dict[str, ModelVersionInfo]) -> None:
        """Open the fusion's MLflow run now, from this warm process: the run starts when its
        adapters are there, while Ray starts a worker for the training (seconds, more on a busy
        node). The task reopens the same run; nothing is opened for a fusion already trained."""
        sources = self.config.fusion.targets[self.target]
        prefix = self.config.registry_prefix
        versions = {t: found[adapter_model_name(prefix, t)] for t in sources}
        first = seed_configs(self.config)[0]  # the job trains the seeds in this order
        plan = plan_fusion(first, self.target, self.uri, versions)
        if plan.existing is None:
            open_plan_run(first, plan, self.uri, self.experiment_id)
            self.say(f"fusion {self.target}: adapters {plan.lineage} ready, starting")

    def _progress(self, missing: list[str]) -> None:
        if self.stop.is_set():
            raise InterruptedError(f"fusion {self.target}: the adapter stage failed")
        if missing and self.ref is None and self.watch.all_started(self.config, self.uri):
            # the job opens its own run when the adapters appear: the gate no longer does
            self.ref = self._submit(warm=True, timeout_s=self.timeout_s)
            self.say(f"fusion {self.target}: every trial has started; warming up its job")


def fusion_failed_line(target: str, error: BaseException, stopped: bool = False) -> str | None:
    """Said when a fusion fails, as a baseline's failure is; the summary names it again. None
    for a fusion stopped (Ctrl-C, `adapterfleet stop`: it read `failed: TaskCancelledError`)."""
    cancelled = type(error).__name__ == "TaskCancelledError"  # Ray's, for a cancelled task
    if stopped or cancelled or isinstance(error, (InterruptedError, KeyboardInterrupt)):
        return None
    return f"fusion {target}: failed: {cause_text(error)}"


def fusion_note(gates: Sequence[FusionGate]) -> str:
    """`fusions 1 waiting, 1 training`: the fusion gates by state ("" without fusions)."""
    states = [gate.state for gate in gates]
    counts = [f"{states.count(s)} {s}" for s in ("waiting", "training", "done", "failed")]
    return "fusions " + ", ".join(c for c in counts if not c.startswith("0 ")) if gates else ""


def run_pipeline(
    config: PipelineConfig,
    *,
    resume: bool | None = None,
    ray_address: str | None = None,
    num_cpus: int | None = None,
    fusion_timeout_s: float = 24 * 3600,
    overrides: Sequence[str] = (),
    say: Say = print,
    level: Level = Level.DEFAULT,
) -> PipelineSummary:
    """Run the pipeline of `config`; `overrides`: the `--set` changes it was loaded with (for the
    report). `say` gets every progress line, the Ray workers' relayed; `level`: how much Ray,
    Tune and MLflow print besides (`relay.console`). Trials failed: `errors["adapters"]`."""
    options = {"resume": resume, "ray_address": ray_address, "num_cpus": num_cpus}
    config = require_config(config)
    overrides = overrides or config.overrides  # those it was loaded with, from Python
    with console(level, say) as relay, stops_when_full(config.storage):
        return _run_pipeline(config, fusion_timeout_s, overrides, relay, **options)


def _run_pipeline(
    config: PipelineConfig,
    fusion_timeout_s: float,
    overrides: Sequence[str],
    relay: WorkerRelay,
    *,
    resume: bool | None,
    ray_address: str | None,
    num_cpus: int | None,
) -> PipelineSummary:
    started = time.time()
    say = relay.say
    uri = config.tracking_uri
    if resume:  # nothing to resume is refused before anything is written
        check_store(uri, say=say)
        check_resumable(config, uri)
    experiment_id, loaded = _validate_and_start(
        config, uri, ray_address, num_cpus, overrides, relay
    )
    with heartbeat(uri, experiment_id, say, sweep=True):  # `status` tells a killed driver
        summary = PipelineSummary(config.name, uri)
        watch = SweepWatch()  # the sweep tells the stages beside it when it has begun
        gates, launcher = _start_stages(config, experiment_id, relay, fusion_timeout_s, watch)
        try:
            try:
                summary.adapters = run_adapter_stage(
                    config, resume=resume, ray_address=ray_address, num_cpus=num_cpus,
                    progress=say, level=relay.level, note=lambda: fusion_note(gates),
                    loaded=loaded, overrides=overrides, watch=watch,
                )  # fmt: skip
            except BaseException as error:
                _stop_stages(gates, launcher)
                summary.errors["adapters"] = str(error)
                if not isinstance(error, TrialsFailed):  # it ran: the summary says what it did
                    raise
                summary.adapters = error.registered
            finally:
                launcher.stage_ended.set()
                _join_fusions(gates, summary)
            _join_baselines(config, launcher, summary, relay)
        except KeyboardInterrupt:  # the sweep's trials are killed by then (`run_sweep`)
            _stop_stages(gates, launcher, cancel=True)
            note_interrupted(config)
            raise
        full = next((error for error in summary.errors.values() if says_full(error)), None)
        if full is not None:  # a fusion or baseline found the disk full: one line, not each
            raise DiskFullError(config.storage, full)
        if config.baselines.systems:
            folder = Path(config.storage) / "report" / config.name
            scope = report_scope(config, uri, overrides)
            summary.report = build_report(config.name, uri, folder, scope=scope)
    summary.seconds = time.time() - started
    return summary


def _validate_and_start(
    config: PipelineConfig,
    uri: str,
    ray_address: str | None,
    num_cpus: int | None,
    overrides: Sequence[str],
    relay: WorkerRelay,
) -> tuple[str, dict[str, TaskData]]:
    """Validate the whole config (a local Ray's node included, before it starts), start (or
    join) Ray and check that its nodes can hold a trial; only then create the experiment, so a
    refusal writes nothing. The experiment id, and the tasks validation loaded (the sweep
    tokenises them without reading them again, which said each data warning twice)."""
    shown, tasks = safe_uri(uri), plural(len(config.tasks), "task")
    relay.say(f"pipeline {config.name}: validating ({tasks}, tracking {shown})")
    address = ray_address or os.environ.get("RAY_ADDRESS")
    local = address in (None, "local") and not ray_initialized()
    loaded = validate_pipeline(
        config,
        check_tracking=lambda u: check_store(u, say=relay.say),
        tracking_uri=uri,
        nodes=[local_node(num_cpus)] if local else None,
    )
    refuse_second_driver_of(uri, config.name)  # before Ray starts or anything is written
    if address not in (None, "local") and not ray_initialized():
        check_ray_address(str(address))
    ensure_ray(ray_address, num_cpus, ray_log_level(relay.level))
    relay.attach()
    import ray  # started just above; importing it earlier would slow every command

    nodes = [n["Resources"] for n in ray.nodes() if n.get("Alive")]
    check_resources(config, nodes, say=None if local else relay.say)  # a cluster's: said
    tags = pipeline_tags(config, overrides)
    return ensure_experiment(uri, config.name, tags=tags, say=relay.say), loaded


def _start_stages(
    config: PipelineConfig,
    experiment_id: str,
    relay: WorkerRelay,
    fusion_timeout_s: float,
    watch: SweepWatch,
) -> tuple[list[FusionGate], BaselineLauncher]:
    """A gate per fusion target, and the baselines' launcher, started beside the sweep."""
    uri, early = config.tracking_uri, _early_target(config)
    gates = [
        FusionGate(
            config, target, uri, experiment_id, relay, fusion_timeout_s, target == early, watch
        )
        for target in config.fusion.targets
    ]
    for gate in gates:
        gate.start()
    launcher = BaselineLauncher(config, uri, experiment_id, relay.say, watch)
    if config.baselines.systems:
        launcher.start()
    return gates, launcher


def _stop_stages(
    gates: Sequence[FusionGate], launcher: BaselineLauncher, *, cancel: bool = False
) -> None:
    """Tell the fusion gates to stop waiting for adapters and the baselines not to start; with
    `cancel` (Ctrl-C) also cancel the fusion and baseline jobs on Ray, and wait a moment for
    the gates. The CLI leaves Ray next, which ends them all; a caller that stays in Ray (a
    notebook) had them train on, and register, after its KeyboardInterrupt."""
    for gate in gates:
        gate.stop.set()
        if cancel and gate.ref is not None and gate.outcome is None:
            cancel_while_joined(gate.ref)
    launcher.cancelled = True
    if cancel:
        for ref in launcher.refs:
            cancel_while_joined(ref)
        deadline = time.monotonic() + GATES_STOP_S
        for gate in gates:
            gate.join(max(0.0, deadline - time.monotonic()))


def _join_fusions(gates: Sequence[FusionGate], summary: PipelineSummary) -> None:
    """Wait for every fusion gate; its outcome or error goes into `summary`."""
    for gate in gates:
        gate.join()
        if gate.outcome is not None:
            summary.fusions[gate.target] = gate.outcome
        elif gate.error is not None and not isinstance(gate.error, InterruptedError):
            summary.errors[f"fusion {gate.target}"] = cause_text(gate.error)


def _join_baselines(
    config: PipelineConfig,
    launcher: BaselineLauncher,
    summary: PipelineSummary,
    relay: WorkerRelay,
) -> None:
    """Wait for the baselines stage (if it was started); outcomes and errors into `summary`."""
    if launcher.ident is not None:  # started
        launcher.join()
    if launcher.error is not None:
        summary.errors["baselines"] = str(launcher.error)
    summary.baselines = collect_baselines(config, launcher.refs, relay.say, relay)
    for label, error in summary.baselines.errors.items():
        summary.errors[f"baseline {label}"] = error


def _early_target(config: PipelineConfig) -> str | None:
    """The one fusion started with the pipeline, reserving nothing: CPU only, and its adapters
    are those of every swept task (so when it trains, the sweep is over)."""
    if config.resources.gpu:
        return None
    swept = set(config.adapter_tasks)
    for target, sources in config.fusion.targets.items():
        if swept <= set(sources):
            return target
    return None
