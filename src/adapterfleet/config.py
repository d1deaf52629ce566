"""The pipeline config: one validated model loaded from YAML, with `key.path=value` overrides.

name: demo                      # names the MLflow experiment, the registry prefix and storage
base_model: minilm-l6           # the packaged MiniLM, a hub id or a local path
max_length: 128
storage: adapterfleet-runs      # run folders, token cache, Ray results (relative to the cwd)
tracking_uri: null              # null: sqlite:///<storage>/mlflow.db with local artifacts
registry_prefix: null           # null: the pipeline name
tasks_file: glue.yaml           # or inline `data_root:` + `tasks:`, or `demo_tasks: true`
adapters: {architecture, reduction_factors, learning_rates, tasks, seeds, training: {...},
           task_training: {rte: {...}}, task_grid: {rte: {reduction_factors, learning_rates}},
           search: grid|optuna, num_samples, scheduler: fifo|asha, asha_grace_period, ...}
fusion: {targets: {rte: all}, preset: dynamic, seeds: [0], training: {...}}
baselines: {systems: [head, full, st-a-houlsby, mt-a, fusion-mt-a], tasks, seeds,
            reduction_factor, training: {...}, system_training: {full: {...}}}
resources: {cpu: 1, gpu: 0}     # per trial; fractional GPUs allowed
budgets: {cpu: {...}, full: {...}}  # named changes to this document, chosen with budget: NAME
"""

from __future__ import annotations

import copy
import importlib.util
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from adapterfleet.data import TaskError, TaskSpec, load_yaml, tasks_from_mapping
from adapterfleet.training.config import TrainConfig

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*$")
TOP_KEYS = (
    "name",
    "base_model",
    "max_length",
    "storage",
    "tracking_uri",
    "registry_prefix",
    "tasks_file",
    "data_root",
    "tasks",
    "demo_tasks",
    "adapters",
    "fusion",
    "baselines",
    "resources",
    "budget",
    "budgets",
)
ADAPTER_DEFAULTS = {"learning_rate": 1e-4, "max_epochs": 30, "patience": 3}
SEARCHES = ("grid", "optuna")
SCHEDULERS = ("fifo", "asha")
# Keys that only mean something with a given search / scheduler.
OPTUNA_KEYS = ("num_samples", "learning_rate_range")
ASHA_KEYS = ("asha_grace_period", "asha_reduction")
FUSION_DEFAULTS = {"learning_rate": 5e-5, "max_epochs": 10, "patience": 3}
# The columns of the paper's Table 1 besides ST-A and Fusion w/ ST-A (the pipeline's own stages).
BASELINE_SYSTEMS = ("head", "full", "st-a-houlsby", "mt-a", "fusion-mt-a")
BASELINE_DEFAULTS = {"learning_rate": 1e-4, "max_epochs": 30, "patience": 3}


class ConfigError(ValueError):
    """A config value is wrong; the message names the field and the fix."""


@dataclass(frozen=True)
class TaskGrid:
    """The reduction factors and learning rates a grid sweep tries for one task."""

    reduction_factors: tuple[int, ...]
    learning_rates: tuple[float, ...]


@dataclass(frozen=True)
class AdapterStage:
    architecture: str = "pfeiffer"
    reduction_factors: tuple[int, ...] = (2, 16, 64)
    learning_rates: tuple[float, ...] = (1e-4,)
    tasks: tuple[str, ...] = ()
    seeds: tuple[int, ...] = (0,)
    training: TrainConfig = field(default_factory=lambda: TrainConfig(**ADAPTER_DEFAULTS))
    task_training: dict[str, TrainConfig] = field(default_factory=dict)
    task_grid: dict[str, TaskGrid] = field(default_factory=dict)  # grid search: per-task points
    search: str = "grid"  # grid: every point; optuna: `num_samples` trials per task
    num_samples: int = 8
    learning_rate_range: tuple[float, float] | None = None  # optuna: log-uniform, else categorical
    scheduler: str = "fifo"  # fifo: every trial runs to its end; asha: early stopping per task
    asha_grace_period: int = 1  # epochs before ASHA may stop a trial
    asha_reduction: float = 4.0  # ASHA keeps the best 1/asha_reduction at each rung

    def training_for(self, task: str) -> TrainConfig:
        """The training settings of `task`: `training`, with that task's `task_training` changes."""
        return self.task_training.get(task, self.training)

    def grid_for(self, task: str | None) -> TaskGrid:
        """The grid of `task`: its `task_grid` entry, else (and for None) `reduction_factors` ×
        `learning_rates`."""
        default = TaskGrid(self.reduction_factors, self.learning_rates)
        return self.task_grid.get(task, default) if task else default


@dataclass(frozen=True)
class FusionStage:
    targets: dict[str, tuple[str, ...]] = field(default_factory=dict)
    preset: str = "dynamic"
    training: TrainConfig = field(default_factory=lambda: TrainConfig(**FUSION_DEFAULTS))
    seeds: tuple[int, ...] = ()  # one fusion per seed, `best` the best of them; () = training.seed

    @property
    def fusion_seeds(self) -> tuple[int, ...]:
        return self.seeds or (self.training.seed,)


@dataclass(frozen=True)
class BaselineStage:
    """The other systems of the paper's Table 1, trained per task and seed for comparison.

    `mt-a` trains the adapters of every adapter task jointly with the base model (one job per
    seed); `fusion-mt-a` fuses those adapters on top of that base for each of `tasks`."""

    systems: tuple[str, ...] = ()
    tasks: tuple[str, ...] = ()
    seeds: tuple[int, ...] = (0,)
    reduction_factor: int = 16
    training: TrainConfig = field(default_factory=lambda: TrainConfig(**BASELINE_DEFAULTS))
    system_training: dict[str, TrainConfig] = field(default_factory=dict)

    def training_for(self, system: str) -> TrainConfig:
        return self.system_training.get(system, self.training)


@dataclass(frozen=True)
class Resources:
    cpu: float = 1.0
    gpu: float = 0.0


@dataclass(frozen=True)
class PipelineConfig:
    name: str
    tasks: dict[str, TaskSpec]
    base_model: str = "minilm-l6"
    max_length: int = 128
    storage: Path = Path("adapterfleet-runs")
    tracking_uri: str | None = None
    registry_prefix: str = ""
    adapters: AdapterStage = field(default_factory=AdapterStage)
    fusion: FusionStage = field(default_factory=FusionStage)
    baselines: BaselineStage = field(default_factory=BaselineStage)
    resources: Resources = field(default_factory=Resources)
    budget: str | None = None  # the budget chosen from `budgets`, if any
    budget_changes: dict[str, Any] = field(default_factory=dict)  # flat key -> value it set
    source: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def adapter_tasks(self) -> tuple[str, ...]:
        return self.adapters.tasks or tuple(self.tasks)

    @property
    def tokens_dir(self) -> Path:
        """The tokenisation cache that every run and trial of this pipeline shares."""
        return self.storage / "tokens"


def load_config(path: str | Path, overrides: Sequence[str] = ()) -> PipelineConfig:
    """Read, override and validate a pipeline YAML file; every error is one line."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config file {path} not found; pass the path of a pipeline YAML file")
    try:
        document = load_yaml(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(error, "problem", None) or str(error).splitlines()[0]
        raise ConfigError(f"{path}: YAML syntax error{where}: {problem}") from None
    if not isinstance(document, Mapping):
        raise ConfigError(f"{path}: expected a mapping of settings at the top level")
    document = apply_overrides(dict(document), overrides)
    document = apply_budget(document, overrides)
    document.setdefault("name", re.sub(r"[^A-Za-z0-9_-]", "-", path.stem))
    return parse_config(document, path.parent)


def apply_budget(document: dict[str, Any], overrides: Sequence[str] = ()) -> dict[str, Any]:
    """Merge the changes of the budget named by `budget` (from `budgets`) into the document;
    the command line's overrides are applied again after it, so they win."""
    name = document.get("budget")
    if name is None:
        return document
    budgets = _mapping(document.get("budgets") or {}, "budgets")
    if name not in budgets:
        known = ", ".join(map(str, budgets)) or "none (add a budgets: section)"
        raise ConfigError(f"budget: {name!r} is not declared in budgets; declared: {known}")
    changes = _mapping(budgets[name] or {}, f"budgets.{name}")
    if "budget" in changes or "budgets" in changes:
        raise ConfigError(f"budgets.{name}: a budget cannot set budget or budgets")
    return apply_overrides(_merged(document, changes), overrides)


def _merged(document: Mapping[str, Any], changes: Mapping[str, Any]) -> dict[str, Any]:
    """`document` with `changes` merged in: mappings key by key, anything else replaced."""
    out = copy.deepcopy(dict(document))
    for key, value in changes.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = _merged(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def flat_changes(changes: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """`{"a": {"b": 1}}` -> `{"a.b": 1}`: what a budget changes, one key path per value."""
    out: dict[str, Any] = {}
    for key, value in changes.items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            out.update(flat_changes(value, path + "."))
        else:
            out[path] = value
    return out


def apply_overrides(document: dict[str, Any], overrides: Sequence[str]) -> dict[str, Any]:
    """`adapters.training.max_epochs=3` style overrides; values are read as YAML scalars."""
    document = copy.deepcopy(document)
    for item in overrides:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"override {item!r} must look like key.path=value")
        node = document
        parts = key.strip().split(".")
        for part in parts[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise ConfigError(f"override {item!r}: {part} is not a mapping")
            node = child
        node[parts[-1]] = _scalar(raw)
    return document


def _scalar(raw: str) -> Any:
    """An override value read as YAML (numbers, lists, mappings); plain text when it is not."""
    if not raw.strip():
        return None
    try:
        return yaml.safe_load(raw)
    except yaml.YAMLError:
        return raw


def parse_config(document: Mapping[str, Any], base_dir: Path) -> PipelineConfig:
    _unknown(document, TOP_KEYS, "config")
    name = document.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        raise ConfigError(f"name: {name!r} must be letters, digits, '_' or '-' (e.g. name: glue)")
    try:
        tasks = _tasks(document, base_dir)
        adapters = _adapter_stage(document.get("adapters") or {}, tasks)
        fusion = _fusion_stage(document.get("fusion") or {}, tasks, adapters)
        baselines = _baseline_stage(document.get("baselines") or {}, tasks, adapters, fusion)
    except TaskError as error:
        raise ConfigError(str(error)) from None
    budget = document.get("budget")
    changes = (document.get("budgets") or {}).get(budget) or {} if budget is not None else {}
    # Absolute from here on: Ray workers and submitted jobs do not share the driver's cwd.
    storage = Path(str(document.get("storage") or "adapterfleet-runs")).expanduser().resolve()
    return PipelineConfig(
        name=name,
        tasks=tasks,
        base_model=_string(document, "base_model", "minilm-l6"),
        max_length=_int(document.get("max_length", 128), "max_length", 8),
        storage=storage,
        tracking_uri=document.get("tracking_uri") or None,
        registry_prefix=_string(document, "registry_prefix", name),
        adapters=adapters,
        fusion=fusion,
        baselines=baselines,
        resources=_resources(document.get("resources") or {}),
        budget=None if budget is None else str(budget),
        budget_changes=flat_changes(changes),
        source=dict(document),
    )


def _tasks(document: Mapping[str, Any], base_dir: Path) -> dict[str, TaskSpec]:
    given = [k for k in ("tasks_file", "tasks", "demo_tasks") if document.get(k)]
    if len(given) != 1:
        raise ConfigError(
            "tasks: give exactly one of tasks_file (a tasks YAML), tasks (inline, with data_root) "
            f"or demo_tasks: true; found {given or 'none'}"
        )
    if given[0] == "demo_tasks":
        from adapterfleet.data import generate_demo_suite

        storage = Path(str(document.get("storage") or "adapterfleet-runs")).expanduser()
        return generate_demo_suite(storage.resolve() / "demo-data")
    if given[0] == "tasks_file":
        from adapterfleet.data import load_tasks_config

        return load_tasks_config(base_dir / str(document["tasks_file"]))
    inline = {k: document[k] for k in ("data_root", "tasks") if k in document}
    return tasks_from_mapping(inline, base_dir)


def _adapter_stage(raw: Any, tasks: Mapping[str, TaskSpec]) -> AdapterStage:
    raw = _mapping(raw, "adapters")
    allowed = (
        "architecture",
        "reduction_factors",
        "learning_rates",
        "tasks",
        "seeds",
        "training",
        "task_training",
        "task_grid",
        "search",
        "scheduler",
        *OPTUNA_KEYS,
        *ASHA_KEYS,
    )
    _unknown(raw, allowed, "adapters")
    architecture = raw.get("architecture", "pfeiffer")
    if architecture not in ("pfeiffer", "houlsby"):
        raise ConfigError(
            f"adapters.architecture: {architecture!r} is unknown; use pfeiffer or houlsby"
        )
    rfs = tuple(
        _int(v, "adapters.reduction_factors", 1)
        for v in _list(raw, "reduction_factors", [2, 16, 64], "adapters")
    )
    lrs = tuple(
        _float(v, "adapters.learning_rates")
        for v in _list(raw, "learning_rates", [1e-4], "adapters")
    )
    seeds = _seeds(raw, "adapters.seeds")
    names = tuple(str(t) for t in _list(raw, "tasks", list(tasks), "adapters"))
    _known_tasks(names, tasks, "adapters.tasks")
    base = {**ADAPTER_DEFAULTS, **_mapping(raw.get("training") or {}, "adapters.training")}
    training = _training(base, {}, "adapters.training")
    per_task = _mapping(raw.get("task_training") or {}, "adapters.task_training")
    _known_tasks(list(per_task), tasks, "adapters.task_training")
    task_training = {
        str(task): _training(
            {**base, **_mapping(changes, f"adapters.task_training.{task}")},
            {},
            f"adapters.task_training.{task}",
        )
        for task, changes in per_task.items()
    }
    task_grid = _task_grid(raw.get("task_grid") or {}, tasks, TaskGrid(rfs, lrs))
    stage = AdapterStage(architecture, rfs, lrs, names, seeds, training, task_training, task_grid)
    return _search_settings(raw, stage)


def _task_grid(raw: Any, tasks: Mapping[str, TaskSpec], default: TaskGrid) -> dict[str, TaskGrid]:
    """`adapters.task_grid`: per task, the reduction factors and/or learning rates its grid
    tries instead of the stage's (e.g. a wide adapter for a small target, trained slower)."""
    per_task = _mapping(raw, "adapters.task_grid")
    _known_tasks(list(per_task), tasks, "adapters.task_grid")
    grids = {}
    for task, changes in per_task.items():
        where = f"adapters.task_grid.{task}"
        changes = _mapping(changes, where)
        _unknown(changes, ("reduction_factors", "learning_rates"), where)
        rfs = _list(changes, "reduction_factors", list(default.reduction_factors), where)
        lrs = _list(changes, "learning_rates", list(default.learning_rates), where)
        grids[str(task)] = TaskGrid(
            tuple(_int(v, f"{where}.reduction_factors", 1) for v in rfs),
            tuple(_float(v, f"{where}.learning_rates") for v in lrs),
        )
    return grids


def _search_settings(raw: Mapping[str, Any], stage: AdapterStage) -> AdapterStage:
    """`search`, `scheduler` and their knobs; keys of an unused method are refused."""
    search = _choice(raw.get("search", "grid"), SEARCHES, "adapters.search")
    scheduler = _choice(raw.get("scheduler", "fifo"), SCHEDULERS, "adapters.scheduler")
    _only_with(raw, OPTUNA_KEYS, search == "optuna", "search: optuna")
    _only_with(raw, ("task_grid",), search == "grid", "search: grid")
    _only_with(raw, ASHA_KEYS, scheduler == "asha", "scheduler: asha")
    if search == "optuna" and importlib.util.find_spec("optuna") is None:
        raise ConfigError(
            "adapters.search: optuna is not installed; pip install 'adapterfleet[optuna]'"
        )
    lr_range = None
    if "learning_rate_range" in raw:
        if "learning_rates" in raw:
            raise ConfigError(
                "adapters.learning_rate_range: give it or adapters.learning_rates, not both"
            )
        lr_range = _lr_range(raw["learning_rate_range"])
    grace = _int(raw.get("asha_grace_period", 1), "adapters.asha_grace_period", 1)
    reduction = _float(raw.get("asha_reduction", 4), "adapters.asha_reduction")
    if reduction <= 1:
        raise ConfigError(f"adapters.asha_reduction: expected a number > 1, got {reduction}")
    if search != "grid" or scheduler != "fifo":
        _same_metric(stage, f"adapters.search: {search} with scheduler: {scheduler}")
    if scheduler == "asha":
        _grace_fits(stage, grace)
    return replace(
        stage,
        search=search,
        num_samples=_int(raw.get("num_samples", 8), "adapters.num_samples", 1),
        learning_rate_range=lr_range,
        scheduler=scheduler,
        asha_grace_period=grace,
        asha_reduction=reduction,
    )


def _only_with(raw: Mapping[str, Any], keys: Sequence[str], used: bool, needs: str) -> None:
    given = [k for k in keys if k in raw]
    if given and not used:
        raise ConfigError(
            f"adapters.{given[0]}: only used with adapters.{needs}; set that or remove the key"
        )


def _lr_range(value: Any) -> tuple[float, float]:
    where = "adapters.learning_rate_range"
    if not isinstance(value, list) or len(value) != 2:
        raise ConfigError(f"{where}: expected [low, high], got {value!r}")
    low, high = (_float(v, where) for v in value)
    if not 0 < low < high:
        raise ConfigError(f"{where}: expected 0 < low < high, got [{low}, {high}]")
    return low, high


def _same_metric(stage: AdapterStage, why: str) -> None:
    """One metric for every task: the scheduler and searcher compare `best_dev_<metric>`."""
    for task, training in stage.task_training.items():
        if training.metric != stage.training.metric:
            raise ConfigError(
                f"adapters.task_training.{task}.metric: {why} compares every task on "
                f"adapters.training.metric ({stage.training.metric}); remove the per-task metric"
            )


def _grace_fits(stage: AdapterStage, grace: int) -> None:
    for task in stage.tasks:
        epochs = stage.training_for(task).max_epochs
        if grace > epochs:
            raise ConfigError(
                f"adapters.asha_grace_period: {grace} is more than the {epochs} max_epochs of "
                f"task {task!r}; lower it"
            )


def _fusion_stage(raw: Any, tasks: Mapping[str, TaskSpec], adapters: AdapterStage) -> FusionStage:
    raw = _mapping(raw, "fusion")
    _unknown(raw, ("targets", "preset", "training", "seeds"), "fusion")
    preset = raw.get("preset", "dynamic")
    if preset not in ("dynamic", "static"):
        raise ConfigError(f"fusion.preset: {preset!r} is unknown; use dynamic or static")
    targets: dict[str, tuple[str, ...]] = {}
    for target, sources in _mapping(raw.get("targets") or {}, "fusion.targets").items():
        _known_tasks([str(target)], tasks, "fusion.targets")
        names = adapters.tasks if sources in ("all", None) else tuple(str(s) for s in sources)
        if isinstance(sources, str) and sources != "all":
            raise ConfigError(f"fusion.targets.{target}: use 'all' or a list of adapter tasks")
        _known_tasks(names, {t: None for t in adapters.tasks}, f"fusion.targets.{target}")
        targets[str(target)] = names
    training = _training(raw.get("training"), FUSION_DEFAULTS, "fusion.training")
    seeds = _seeds(raw, "fusion.seeds") if raw.get("seeds") is not None else ()
    return FusionStage(targets, preset, training, seeds)


def _baseline_stage(
    raw: Any, tasks: Mapping[str, TaskSpec], adapters: AdapterStage, fusion: FusionStage
) -> BaselineStage:
    raw = _mapping(raw, "baselines")
    allowed = ("systems", "tasks", "seeds", "reduction_factor", "training", "system_training")
    _unknown(raw, allowed, "baselines")
    if not raw:
        return BaselineStage()
    systems = tuple(str(s) for s in _list(raw, "systems", list(BASELINE_SYSTEMS), "baselines"))
    unknown = [s for s in systems if s not in BASELINE_SYSTEMS]
    if unknown:
        raise ConfigError(
            f"baselines.systems: unknown system(s) {unknown}; use {', '.join(BASELINE_SYSTEMS)}"
        )
    names = tuple(
        str(t) for t in _list(raw, "tasks", list(fusion.targets) or list(tasks), "baselines")
    )
    _known_tasks(names, tasks, "baselines.tasks")
    if "mt-a" in systems or "fusion-mt-a" in systems:
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
    base = {**BASELINE_DEFAULTS, **_mapping(raw.get("training") or {}, "baselines.training")}
    per_system = _mapping(raw.get("system_training") or {}, "baselines.system_training")
    extra = [s for s in per_system if s not in systems]
    if extra:
        raise ConfigError(
            f"baselines.system_training: {extra} not in baselines.systems {list(systems)}"
        )
    return BaselineStage(
        systems=systems,
        tasks=names,
        seeds=_seeds(raw, "baselines.seeds"),
        reduction_factor=_int(raw.get("reduction_factor", 16), "baselines.reduction_factor", 1),
        training=_training(base, {}, "baselines.training"),
        system_training={
            str(system): _training(
                {**base, **_mapping(changes, f"baselines.system_training.{system}")},
                {},
                f"baselines.system_training.{system}",
            )
            for system, changes in per_system.items()
        },
    )


def _seeds(raw: Mapping[str, Any], where: str) -> tuple[int, ...]:
    value = raw.get("seeds", [0])
    if value == []:
        raise ConfigError(f"{where}: needs at least one seed")
    seeds = tuple(_int(v, where, 0) for v in (value if isinstance(value, list) else [value]))
    if len(set(seeds)) != len(seeds):
        raise ConfigError(f"{where}: a seed is listed twice in {list(seeds)}")
    return seeds


def _training(raw: Any, defaults: Mapping[str, Any], where: str) -> TrainConfig:
    values = {**defaults, **_mapping(raw or {}, where)}
    for key in ("learning_rate", "weight_decay", "warmup_ratio", "max_grad_norm"):
        if isinstance(values.get(key), str):
            values[key] = _float(values[key], f"{where}.{key}")
    try:
        return TrainConfig.from_dict(values)
    except (TypeError, ValueError) as error:
        text = str(error)  # "TrainConfig.patience must be ..." or "TrainConfig: unknown ..."
        if text.startswith("TrainConfig."):
            raise ConfigError(f"{where}.{text.removeprefix('TrainConfig.')}") from None
        raise ConfigError(f"{where}: {text.removeprefix('TrainConfig: ')}") from None


def _choice(value: Any, allowed: Sequence[str], where: str) -> str:
    if value not in allowed:
        raise ConfigError(f"{where}: {value!r} is unknown; use {' or '.join(allowed)}")
    return str(value)


def _resources(raw: Any) -> Resources:
    raw = _mapping(raw, "resources")
    _unknown(raw, ("cpu", "gpu"), "resources")
    cpu = _float(raw.get("cpu", 1), "resources.cpu")
    gpu = _float(raw.get("gpu", 0), "resources.gpu")
    if cpu <= 0 or gpu < 0 or (gpu > 1 and gpu != int(gpu)):
        raise ConfigError(
            f"resources: cpu must be > 0 and gpu a fraction in [0, 1] or a whole number, "
            f"got cpu={cpu}, gpu={gpu}"
        )
    return Resources(cpu, gpu)


def _known_tasks(names: Sequence[str], tasks: Mapping[str, Any], where: str) -> None:
    unknown = [n for n in names if n not in tasks]
    if unknown:
        raise ConfigError(f"{where}: unknown task(s) {unknown}; known: {sorted(tasks)}")
    if len(set(names)) != len(names):
        raise ConfigError(f"{where}: a task is listed twice in {list(names)}")


def _unknown(raw: Mapping[str, Any], allowed: Sequence[str], where: str) -> None:
    unknown = sorted(set(raw) - set(allowed))
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {unknown}; allowed: {', '.join(allowed)}")


def _mapping(raw: Any, where: str) -> dict[str, Any]:
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where}: expected a mapping, got {type(raw).__name__} {raw!r}")
    return dict(raw)


def _list(raw: Mapping[str, Any], key: str, default: list[Any], where: str = "") -> list[Any]:
    value = raw.get(key, default)
    value = [value] if not isinstance(value, list) else value
    if not value:
        raise ConfigError(f"{where + '.' if where else ''}{key}: needs at least one value")
    return value


def _string(document: Mapping[str, Any], key: str, default: str) -> str:
    value = document.get(key) or default
    if not isinstance(value, str):
        raise ConfigError(f"{key}: expected a string, got {value!r}")
    return value


def _int(value: Any, where: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(f"{where}: expected an integer >= {minimum}, got {value!r}")
    return value


def _float(value: Any, where: str) -> float:
    try:
        if isinstance(value, bool):
            raise ValueError
        return float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{where}: expected a number, got {value!r}") from None
