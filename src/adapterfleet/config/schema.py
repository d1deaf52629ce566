"""`PipelineConfig`: the validated pipeline, built by `parse_config` from a document (the YAML
after budgets and overrides); each stage reads and checks its own section.

Storage and the tracking store are resolved once, when a `PipelineConfig` is built: `storage`
becomes absolute and `tracking_uri` the store every later reader uses (driver, Ray workers,
submitted jobs), whatever their working directory or environment. `source`, the document, stays
as written (a submitted cluster job reads the YAML file again, so its own environment decides).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from adapterfleet.adapters.config import BaseModelSpec
from adapterfleet.config.adapter_stage import AdapterStage
from adapterfleet.config.base_model import parse_base_model
from adapterfleet.config.fields import (
    NAME_MAX,
    ConfigError,
    as_int,
    check_path_length,
    flat_changes,
    name_at,
    refuse_unknown,
    string_at,
)
from adapterfleet.config.stages import (
    BaselineStage,
    FusionStage,
    Resources,
    check_fusion_architecture,
)
from adapterfleet.config.task_metrics import checked_task_metrics
from adapterfleet.data import (
    TaskError,
    TaskSpec,
    demo_suite_specs,
    load_tasks_config,
    tasks_from_mapping,
)
from adapterfleet.errors import user_path
from adapterfleet.registry.store import default_tracking_uri, use_login

DEFAULT_STORAGE = "adapterfleet-runs"
# The longest sequence any config may ask for; the base model's own limit is checked when the
# pipeline is validated (orchestration/validate.py), with its config at hand.
MAX_LENGTH = 1 << 20  # relative to the working directory the config is loaded in
TRACKING_URI_ENV = "MLFLOW_TRACKING_URI"
TOP_KEYS = (
    "name",
    "base_model",
    "base_model_layout",
    "base_model_dtype",
    "gradient_checkpointing",
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


def absolute_storage(storage: Any) -> Path:
    """The storage folder (default `DEFAULT_STORAGE`) as an absolute path: Ray workers and
    submitted jobs do not share the driver's working directory."""
    if storage is not None and not isinstance(storage, str | Path):
        raise ConfigError(f"storage: expected a folder path, got {storage!r}")
    return user_path(str(storage or DEFAULT_STORAGE), "storage")


def resolve_tracking_uri(tracking_uri: str | None, storage: Path) -> str:
    """`tracking_uri` if given, else $MLFLOW_TRACKING_URI, else the embedded SQLite store
    (`sqlite:///<storage>/mlflow.db`, artifacts beside it). A `user:password@` in the URI is
    moved into MLFLOW_TRACKING_USERNAME / MLFLOW_TRACKING_PASSWORD (`use_login`): the URI every
    part of the project holds, prints and stores has none."""
    if tracking_uri is not None and not isinstance(tracking_uri, str):
        raise ConfigError(
            f"tracking_uri: expected a URI such as http://host:5000, got {tracking_uri!r}"
        )
    if tracking_uri:
        return use_login(tracking_uri)
    from_env = os.environ.get(TRACKING_URI_ENV)
    if from_env:
        clean = use_login(from_env, where=f"${TRACKING_URI_ENV}")
        os.environ[TRACKING_URI_ENV] = clean  # what Ray workers and submitted jobs inherit
        return clean
    return default_tracking_uri(storage)


@dataclass(frozen=True)
class PipelineConfig:
    """The validated pipeline. When built, `storage` is made absolute and an empty
    `tracking_uri` resolved; a copy (`dataclasses.replace`) keeps the resolved URI, except the
    embedded store of its storage, which a copy given another storage moves with it (it kept
    writing runs into the old folder's mlflow.db)."""

    name: str
    tasks: dict[str, TaskSpec]
    base_model: str = "minilm-l6"
    max_length: int = 128
    storage: Path = Path(DEFAULT_STORAGE)  # made absolute when built: `absolute_storage`
    tracking_uri: str = ""  # empty: `resolve_tracking_uri` when built (env var, else storage)
    registry_prefix: str = ""
    adapters: AdapterStage = field(default_factory=AdapterStage)
    fusion: FusionStage = field(default_factory=FusionStage)
    baselines: BaselineStage = field(default_factory=BaselineStage)
    resources: Resources = field(default_factory=Resources)
    base: BaseModelSpec | None = None  # None: `base_model` alone (set when built)
    budget: str | None = None  # the budget chosen from `budgets`, if any
    budget_changes: dict[str, Any] = field(default_factory=dict)  # flat key -> value it set
    # The document as read (after budget and overrides), with nothing resolved into it.
    source: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    # The storage whose embedded store an empty tracking_uri resolved to (None: one was given).
    embedded_in: Path | None = field(default=None, repr=False, compare=False)
    # The `--set` changes `load_config` applied, which `run_pipeline` records when it is given
    # none (from Python the experiment said `[]` for a config loaded with overrides)
    overrides: tuple[str, ...] = field(default=(), repr=False, compare=False)

    def __post_init__(self) -> None:
        storage = absolute_storage(self.storage)
        object.__setattr__(self, "storage", storage)
        uri, embedded = self.tracking_uri, self.embedded_in
        if embedded is not None and embedded != storage and uri == default_tracking_uri(embedded):
            uri = ""  # a copy given another storage: its own embedded store
        resolved = resolve_tracking_uri(uri, storage)
        if not uri:  # resolved here: the environment's, or the embedded store of `storage`
            embedded = storage if resolved == default_tracking_uri(storage) else None
        object.__setattr__(self, "tracking_uri", resolved)
        object.__setattr__(self, "embedded_in", embedded)
        if self.base is None or self.base.name != self.base_model:
            base = self.base or BaseModelSpec(self.base_model)
            object.__setattr__(self, "base", dataclasses.replace(base, name=self.base_model))

    @property
    def base_model_dtype(self) -> str:
        """The dtype the base loads in, as `base_model_dtype` names it (`auto`: its own)."""
        return self.base.dtype if self.base is not None else "auto"

    @property
    def adapter_tasks(self) -> tuple[str, ...]:
        return self.adapters.tasks or tuple(self.tasks)

    @property
    def tokens_dir(self) -> Path:
        """The tokenisation cache that every run and trial of this pipeline shares."""
        return self.storage / "tokens"


def parse_config(document: Mapping[str, Any], base_dir: Path) -> PipelineConfig:
    """Validate a pipeline document; relative task paths are read from `base_dir`."""
    refuse_unknown(document, TOP_KEYS, "config")
    name = name_at(document, "name", "")
    check_path_length(document.get("storage") or "", "storage")
    storage = absolute_storage(document.get("storage"))
    check_path_length(storage, "storage")
    try:
        tasks = checked_task_metrics(read_tasks(document, base_dir, storage))
        check_task_names(tasks)
        adapters = AdapterStage.from_mapping(document.get("adapters") or {}, tasks)
        fusion = FusionStage.from_mapping(document.get("fusion") or {}, tasks, adapters)
        baselines = BaselineStage.from_mapping(
            document.get("baselines") or {}, tasks, adapters, fusion
        )
        check_fusion_architecture(adapters, fusion, baselines)
    except TaskError as error:
        raise ConfigError(str(error)) from None
    budget = document.get("budget")
    changes = (document.get("budgets") or {}).get(budget) or {} if budget is not None else {}
    base_model = string_at(document, "base_model", "minilm-l6")
    resources = Resources.from_mapping(document.get("resources") or {})
    check_workers(adapters, resources)
    return PipelineConfig(
        name=name,
        tasks=tasks,
        base_model=base_model,
        base=parse_base_model(document, base_model),
        max_length=as_int(document.get("max_length", 128), "max_length", 8, MAX_LENGTH),
        storage=storage,
        tracking_uri=document.get("tracking_uri") or "",
        registry_prefix=name_at(document, "registry_prefix", name, dots=True),
        adapters=adapters,
        fusion=fusion,
        baselines=baselines,
        resources=resources,
        budget=None if budget is None else str(budget),
        budget_changes=flat_changes(changes),
        source=dict(document),
    )


def check_workers(adapters: AdapterStage, resources: Resources) -> None:
    """ASHA stops a trial between epochs through Tune's function trainable, which a trial of
    several workers (a Ray Train run) does not hear; CUDA graphs capture one process's step.
    Either with several workers is refused."""
    if not resources.distributed:
        return
    if adapters.scheduler == "asha":
        raise ConfigError(
            f"adapters.scheduler: asha cannot stop a trial of resources.workers: "
            f"{resources.workers} (a Ray Train run); use scheduler: fifo with workers, or "
            "workers: 1 with asha"
        )
    graphed = [
        where
        for where, training in [
            ("adapters.training", adapters.training),
            *((f"adapters.task_training.{t}", c) for t, c in adapters.task_training.items()),
        ]
        if training.cuda_graphs is True  # auto trains data-parallel ranks eagerly
    ]
    if graphed:
        raise ConfigError(
            f"{graphed[0]}.cuda_graphs: true captures one process's training step, and "
            f"resources.workers: {resources.workers} trains each trial data-parallel; use "
            "cuda_graphs: false with workers, or workers: 1 with cuda_graphs"
        )


def read_tasks(document: Mapping[str, Any], base_dir: Path, storage: Path) -> dict[str, TaskSpec]:
    """The tasks of exactly one of `tasks_file` (a tasks YAML), inline `tasks` (with
    `data_root`) or `demo_tasks: true` (under `<storage>/demo-data`, written when a task is
    first loaded, so loading a config writes nothing). Beside `tasks_file` or `demo_tasks`,
    `tasks:` changes their tasks key by key (`--set tasks.rte.max_train_examples=200`, a
    budget's changes); it cannot add one."""
    demo = document.get("demo_tasks")
    if demo is not None and not isinstance(demo, bool):
        raise ConfigError(f"demo_tasks: expected true or false, got {demo!r}")
    sources = [k for k in ("tasks_file", "demo_tasks") if document.get(k)]
    changes = document.get("tasks")
    if len(sources) > 1 or not (sources or changes):
        given = [k for k in ("tasks_file", "tasks", "demo_tasks") if document.get(k)]
        raise ConfigError(
            "tasks: give exactly one of tasks_file (a tasks YAML), tasks (inline, with data_root) "
            f"or demo_tasks: true; found {given or 'none'}"
        )
    overrides = {"tasks": changes} if sources and changes else None
    if overrides is not None and not isinstance(changes, Mapping):
        raise ConfigError(f"tasks: beside {sources[0]}, expected a mapping of changes to its tasks")
    if sources == ["demo_tasks"]:
        return demo_suite_specs(storage / "demo-data", overrides=overrides)
    if sources == ["tasks_file"]:
        return load_tasks_config(base_dir / str(document["tasks_file"]), overrides)
    inline = {k: document[k] for k in ("data_root", "tasks") if k in document}
    return tasks_from_mapping(inline, base_dir)


def check_task_names(tasks: Mapping[str, TaskSpec]) -> None:
    """A task name becomes part of folder, trial and model names: at most `NAME_MAX` long, and
    without a '.', which names the adapter's and head's modules (torch refuses a '.' there) and
    separates the parts of a registered model's name (`<prefix>.adapter.<task>`)."""
    for name in tasks:
        if "." in name:
            dashed = name.replace(".", "-")
            raise ConfigError(
                f"tasks: the task name {name!r} has a '.', which cannot name its adapter, head "
                f"and registered models ('.' separates their parts); rename it, e.g. {dashed}"
            )
        if len(name) > NAME_MAX:
            raise ConfigError(
                f"tasks: the task name {name[:20]}… has {len(name)} characters; folder and model "
                f"names are made from it: use at most {NAME_MAX}"
            )
