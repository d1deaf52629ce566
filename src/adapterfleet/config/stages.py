"""`fusion:`, `baselines:` and `resources:`: the stages after the sweep, and what a trial gets.

Each class reads and checks its own section (`from_mapping`); `Resources` also checks its range
when built, so a changed copy (`dataclasses.replace`) is checked too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from adapterfleet.adapters.config import DEFAULT_REDUCTION_FACTOR
from adapterfleet.config.adapter_stage import AdapterStage
from adapterfleet.config.fields import (
    ConfigError,
    as_float,
    as_int,
    as_mapping,
    check_tasks,
    list_at,
    refuse_unknown,
    seeds_at,
    training_at,
    trainings_at,
)
from adapterfleet.config.task_metrics import given_metric, leave_out_fix, stage_metrics
from adapterfleet.data import TaskSpec
from adapterfleet.training.config import MT_A_GRAPHS, TrainConfig

FUSION_DEFAULTS = {"learning_rate": 5e-5, "max_epochs": 10, "patience": 3}
FUSION_KEYS = ("targets", "preset", "training", "seeds")
# The columns of the paper's Table 1 besides ST-A and Fusion w/ ST-A (the pipeline's own stages).
BASELINE_SYSTEMS = ("head", "full", "st-a-houlsby", "mt-a", "fusion-mt-a")
BASELINE_DEFAULTS = {"learning_rate": 1e-4, "max_epochs": 30, "patience": 3}
BASELINE_KEYS = ("systems", "tasks", "seeds", "reduction_factor", "training", "system_training")


@dataclass(frozen=True)
class FusionStage:
    targets: dict[str, tuple[str, ...]] = field(default_factory=dict)
    preset: str = "dynamic"
    training: TrainConfig = field(default_factory=lambda: TrainConfig(**FUSION_DEFAULTS))
    seeds: tuple[int, ...] = ()  # one fusion per seed, `best` the best of them; () = training.seed
    target_metrics: dict[str, str] = field(default_factory=dict)  # task -> its metric (resolved)

    @property
    def fusion_seeds(self) -> tuple[int, ...]:
        return self.seeds or (self.training.seed,)

    def training_for(self, target: str) -> TrainConfig:
        """`training` with the metric of `target` (`training.metric` if given, else the default
        of the target's type; config/task_metrics.py)."""
        metric = self.target_metrics.get(target, self.training.metric)
        return (
            self.training
            if metric == self.training.metric
            else replace(self.training, metric=metric)
        )

    def for_target(self, target: str) -> FusionStage:
        """This stage with `training` set to `training_for(target)`: what a fusion job of
        `target` reads."""
        return replace(self, training=self.training_for(target))

    @classmethod
    def from_mapping(
        cls, raw: Any, tasks: Mapping[str, TaskSpec], adapters: AdapterStage
    ) -> FusionStage:
        """The `fusion:` section: each target task fuses `all` or some of the adapter tasks."""
        raw = as_mapping(raw, "fusion")
        refuse_unknown(raw, FUSION_KEYS, "fusion")
        preset = raw.get("preset", "dynamic")
        if preset not in ("dynamic", "static"):
            raise ConfigError(f"fusion.preset: {preset!r} is unknown; use dynamic or static")
        targets: dict[str, tuple[str, ...]] = {}
        for target, sources in as_mapping(raw.get("targets") or {}, "fusion.targets").items():
            check_tasks([str(target)], tasks, "fusion.targets")
            if sources not in ("all", None) and not isinstance(sources, list):
                raise ConfigError(f"fusion.targets.{target}: use 'all' or a list of adapter tasks")
            names = adapters.tasks if sources in ("all", None) else tuple(str(s) for s in sources)
            if not names:
                raise ConfigError(
                    f"fusion.targets.{target}: fuses no adapter; list the adapter tasks to fuse "
                    "or write all"
                )
            if unswept := [n for n in names if n in tasks and n not in adapters.tasks]:
                raise ConfigError(
                    f"fusion.targets.{target}: {', '.join(unswept)}: declared under tasks, but not "
                    f"in adapters.tasks ({', '.join(adapters.tasks)}), so the sweep trains no "
                    "adapter to fuse; add it to adapters.tasks, or leave it out here"
                )  # it read "unknown task(s)"
            check_tasks(names, {t: None for t in adapters.tasks}, f"fusion.targets.{target}")
            targets[str(target)] = names
        training_raw = as_mapping(raw.get("training") or {}, "fusion.training")
        place = (training_raw, "fusion.training.metric")
        given = {t: given_metric(place, fix=leave_out_fix("{key}")) for t in tasks}
        metrics = stage_metrics(tasks, targets, given)
        training = training_at(training_raw, FUSION_DEFAULTS, "fusion.training")
        seeds = seeds_at(raw, "fusion.seeds") if raw.get("seeds") is not None else ()
        return cls(targets, preset, training, seeds, metrics)


@dataclass(frozen=True)
class BaselineStage:
    """The other systems of the paper's Table 1, trained per task and seed for comparison.

    `mt-a` trains the adapters of every adapter task jointly with the base model (one job per
    seed); `fusion-mt-a` fuses those adapters on top of that base for each of `tasks`."""

    systems: tuple[str, ...] = ()
    tasks: tuple[str, ...] = ()
    seeds: tuple[int, ...] = (0,)
    reduction_factor: int = DEFAULT_REDUCTION_FACTOR
    training: TrainConfig = field(default_factory=lambda: TrainConfig(**BASELINE_DEFAULTS))
    system_training: dict[str, TrainConfig] = field(default_factory=dict)
    # system -> task -> the metric it is selected on (config/task_metrics.py)
    task_metrics: dict[str, dict[str, str]] = field(default_factory=dict)

    def training_for(self, system: str, task: str | None = None) -> TrainConfig:
        """The settings of `system`; for one `task`, with that task's metric."""
        training = self.system_training.get(system, self.training)
        metric = self.task_metrics.get(system, {}).get(task or "", training.metric)
        return training if metric == training.metric else replace(training, metric=metric)

    @classmethod
    def from_mapping(
        cls, raw: Any, tasks: Mapping[str, TaskSpec], adapters: AdapterStage, fusion: FusionStage
    ) -> BaselineStage:
        """The `baselines:` section; none (or empty) trains no baseline. Tasks default to the
        fusion targets, else every task; systems to all of `BASELINE_SYSTEMS`."""
        raw = as_mapping(raw, "baselines")
        refuse_unknown(raw, BASELINE_KEYS, "baselines")
        if not raw:
            return cls()
        systems = tuple(
            str(s) for s in list_at(raw, "systems", list(BASELINE_SYSTEMS), "baselines")
        )
        unknown = [s for s in systems if s not in BASELINE_SYSTEMS]
        if unknown:
            raise ConfigError(
                f"baselines.systems: unknown system(s) {unknown}; use {', '.join(BASELINE_SYSTEMS)}"
            )
        default_tasks = list(fusion.targets) or list(tasks)
        names = tuple(str(t) for t in list_at(raw, "tasks", default_tasks, "baselines"))
        check_tasks(names, tasks, "baselines.tasks")
        _check_mt_a(systems, names, tasks, adapters, fusion)
        training_raw = as_mapping(raw.get("training") or {}, "baselines.training")
        base = {**BASELINE_DEFAULTS, **training_raw}
        per_system = as_mapping(raw.get("system_training") or {}, "baselines.system_training")
        extra = [s for s in per_system if s not in systems]
        if extra:
            raise ConfigError(
                f"baselines.system_training: {extra} not in baselines.systems {list(systems)}"
            )
        stage = cls(
            task_metrics=_baseline_metrics(tasks, systems, names, training_raw, per_system),
            systems=systems,
            tasks=names,
            seeds=seeds_at(raw, "baselines.seeds"),
            reduction_factor=as_int(
                raw.get("reduction_factor", DEFAULT_REDUCTION_FACTOR),
                "baselines.reduction_factor",
                1,
            ),
            training=training_at(base, {}, "baselines.training"),
            system_training=trainings_at(per_system, base, "baselines.system_training"),
        )
        if "mt-a" in systems and stage.training_for("mt-a").cuda_graphs is True:
            where = "system_training.mt-a" if "mt-a" in per_system else "training"
            raise ConfigError(f"baselines.{where}.{MT_A_GRAPHS}")
        return stage


def _baseline_metrics(
    tasks: Mapping[str, TaskSpec],
    systems: tuple[str, ...],
    names: tuple[str, ...],
    training: Mapping[str, Any],
    per_system: Mapping[str, Any],
) -> dict[str, dict[str, str]]:
    """Per system, each task's metric: `system_training.<system>.metric`, else
    `training.metric`, else the default of the task's type."""
    out = {}
    for system in systems:
        places = (
            (per_system.get(system), f"baselines.system_training.{system}.metric"),
            (training, "baselines.training.metric"),
        )
        given = {t: given_metric(*places, fix=leave_out_fix("{key}")) for t in tasks}
        out[system] = stage_metrics(tasks, names, given)
    return out


def _check_mt_a(
    systems: tuple[str, ...],
    names: tuple[str, ...],
    tasks: Mapping[str, TaskSpec],
    adapters: AdapterStage,
    fusion: FusionStage,
) -> None:
    """MT-A has adapters for the adapter tasks only; fusion-mt-a needs mt-a and a fusion target
    for each of its tasks."""
    if "mt-a" in systems or "fusion-mt-a" in systems:
        regression = [t for t in adapters.tasks if tasks[t].is_regression]
        if regression:
            raise ConfigError(
                f"baselines.systems: MT-A selects on one metric over the dev sets of every "
                f"adapter task pooled, which regression task(s) {regression} cannot join; "
                "remove mt-a and fusion-mt-a, or the regression tasks from adapters.tasks"
            )
        outside = [t for t in names if t not in adapters.tasks]
        if outside:
            raise ConfigError(
                f"baselines.tasks: {outside} are not adapter tasks, so MT-A (trained over "
                "adapters.tasks) has no adapter for them; add them to adapters.tasks"
            )
    if "fusion-mt-a" in systems:
        if "mt-a" not in systems:
            raise ConfigError("baselines.systems: fusion-mt-a needs mt-a in the list too")
        untargeted = [t for t in names if t not in fusion.targets]
        if untargeted:
            raise ConfigError(
                f"baselines.tasks: fusion-mt-a fuses the adapters of fusion.targets.<task>, "
                f"and {untargeted} have none; add them to fusion.targets"
            )


def check_fusion_architecture(
    adapters: AdapterStage, fusion: FusionStage, baselines: BaselineStage
) -> None:
    """AdapterFusion fuses pfeiffer adapters, and every fusion target fuses the sweep's adapters
    (of `adapters.architecture`): a Houlsby sweep with targets would train every adapter and
    fail at its first fusion. MT-A's adapters are pfeiffer ones, but fusion-mt-a needs the
    targets too, so it is named in the fix."""
    if adapters.architecture == "pfeiffer" or not fusion.targets:
        return
    also = " and fusion-mt-a from baselines.systems" if "fusion-mt-a" in baselines.systems else ""
    raise ConfigError(
        f"fusion.targets: AdapterFusion fuses pfeiffer adapters, and adapters.architecture is "
        f"{adapters.architecture}; set adapters.architecture: pfeiffer (st-a-houlsby in "
        f"baselines.systems trains Houlsby adapters beside them), or remove fusion.targets{also} "
        "to train the Houlsby adapters alone"
    )


BACKENDS = ("auto", "gloo", "nccl")  # torch.distributed's, for trials of several workers
RESOURCE_KEYS = ("cpu", "gpu", "workers", "backend", "max_concurrent_trials")


@dataclass(frozen=True)
class Resources:
    """What each trial (and job) asks Ray for; fractional GPUs allowed. With `workers` > 1 a
    trial is a Ray Train run of that many data-parallel workers, and `cpu` / `gpu` are per
    worker; `backend` is their collective backend (auto: NCCL with GPUs, gloo without)."""

    cpu: float = 1.0
    gpu: float = 0.0
    workers: int = 1
    backend: str = "auto"
    max_concurrent_trials: int | None = None  # None: as many as the cluster can place

    def __post_init__(self) -> None:
        cpu, gpu = self.cpu, self.gpu
        if cpu <= 0 or gpu < 0 or (gpu > 1 and gpu != int(gpu)):
            raise ConfigError(
                f"resources: cpu must be > 0 and gpu a fraction in [0, 1] or a whole number, "
                f"got cpu={cpu}, gpu={gpu}"
            )
        for key, amount in (("cpu", cpu), ("gpu", gpu)):
            if amount != round(amount, 4):  # Ray's step; a finer one failed in Ray's scheduler
                raise ConfigError(
                    f"resources.{key}: {amount:g} is finer than the 0.0001 steps Ray reserves "
                    f"in; give a multiple of 0.0001, e.g. {max(round(amount, 4), 0.0001):g}"
                )
        if gpu > 1:
            per = "per worker" if self.workers > 1 else "per trial"
            raise ConfigError(
                f"resources.gpu: {gpu:g} GPUs {per}, but a process trains on one device; for a "
                f"trial on {gpu:g} GPUs set workers: {self.workers * int(gpu)} and gpu: 1 "
                "(one GPU per data-parallel worker)"
            )
        if self.backend == "nccl" and gpu == 0:
            raise ConfigError(
                "resources.backend: nccl runs on GPUs only, and resources.gpu is 0; use "
                "backend: gloo (or auto) on CPUs, or give each worker a GPU"
            )

    @property
    def distributed(self) -> bool:
        """Whether a trial is a Ray Train run of several workers."""
        return self.workers > 1

    def fitting(self, node: Mapping[str, float]) -> int:
        """How many trials (or workers, with `workers`) fit on a node of these resources
        (Ray's `{"CPU": ..., "GPU": ...}`) at once."""
        need = {"CPU": self.cpu, "GPU": self.gpu}
        return min(int(node.get(key, 0.0) // amount) for key, amount in need.items() if amount > 0)

    @property
    def torch_backend(self) -> str:
        """The collective backend the workers use."""
        if self.backend != "auto":
            return self.backend
        return "nccl" if self.gpu > 0 else "gloo"

    @classmethod
    def from_mapping(cls, raw: Any) -> Resources:
        """The `resources:` section (per trial, or per worker with `workers`)."""
        raw = as_mapping(raw, "resources")
        refuse_unknown(raw, RESOURCE_KEYS, "resources")
        backend = raw.get("backend", "auto")
        if backend not in BACKENDS:
            raise ConfigError(
                f"resources.backend: {backend!r} is unknown; use one of {', '.join(BACKENDS)}"
            )
        return cls(
            as_float(raw.get("cpu", 1), "resources.cpu"),
            as_float(raw.get("gpu", 0), "resources.gpu"),
            as_int(raw.get("workers", 1), "resources.workers", 1),
            backend,
            _optional_int(raw.get("max_concurrent_trials"), "resources.max_concurrent_trials"),
        )


def _optional_int(value: Any, where: str) -> int | None:
    return None if value is None else as_int(value, where, 1)
