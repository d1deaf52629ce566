"""What a sweep is made of, as plain data: stable trial ids, config hashes, the grid, the context.

No ray here: the driver, the trainable and the tests share these definitions.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from adapterfleet._hashing import sha256_file
from adapterfleet.config import PipelineConfig
from adapterfleet.data.tasks import TaskSpec
from adapterfleet.errors import JobFailed, UserError
from adapterfleet.registry import ModelVersionInfo
from adapterfleet.registry.descriptions import TAG_NOTE, sweep_note
from adapterfleet.registry.environment import run_driver
from adapterfleet.registry.tags import TAG_BASE_MODEL, TAG_CONFIG_HASH, TAG_SWEEP, TAG_TRIAL_ID  # noqa: F401 - re-exported

GRID_KEYS = ("task", "reduction_factor", "learning_rate", "seed")
BUILT_IN_LAYOUT = "built-in"  # a version's layout tag where the config declares none
POINT_KEY = "point"  # with adapters.task_grid: the Tune config holds the grid point under this key
SAMPLE_KEY = "sample"  # with a searcher: the trial's index among its task's trials
TRIALS_DIR = "sweeps"  # <storage>/sweeps/<sweep name>/<trial id>/
TOKENS_DIR = "tokens"  # <storage>/tokens/: the shared tokenisation cache
RAY_DIR = "ray"  # <storage>/ray/<pipeline name>/: the Tune experiment
TRAIN_DIR = "train"  # <storage>/ray/train/<sweep name>/<trial id>/: Ray Train's own run
# Tags written on registered adapter versions (besides the registry's own).
TAG_METRIC = "metric"
TAG_METRIC_VALUE = "metric_value"
TAG_METRIC_DIRECTION = "metric_direction"  # max, or min for a lower-is-better metric (mse)
# In every result a trial reports: its task's best dev metric so far made higher-is-better (mse
# negated), the one key ASHA and Optuna compare whatever metric each task is selected on.
OBJECTIVE_KEY = "objective"


class SweepError(UserError, RuntimeError):
    """A sweep cannot start, resume or finish; the message says what to do.

    `registered` holds the tasks that did get an adapter registered before the failure.
    """

    def __init__(self, message: str, registered: Mapping[str, Any] | None = None) -> None:
        super().__init__(message)
        self.registered = dict(registered or {})


class TrialsFailed(SweepError, JobFailed):
    """A sweep ran and some task's trials failed or did not finish: exit 1."""


@dataclass(frozen=True)
class TrialParams:
    """One point of the grid, or one trial a searcher picked (`sample` numbers those)."""

    task: str
    reduction_factor: int
    learning_rate: float
    seed: int
    sample: int | None = None

    @property
    def trial_id(self) -> str:
        """Stable id, e.g. `rte-rf16-lr0.001-s0` (`rte-n3-rf16-lr0.001-s0` for a searcher's
        fourth trial of rte): a restored or re-run trial maps to it."""
        return trial_id(
            self.task, self.reduction_factor, self.learning_rate, self.seed, self.sample
        )

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> TrialParams:
        """From a Tune trial config (the resolved grid point or the searcher's suggestion)."""
        config = trial_point(config)
        sample = config.get(SAMPLE_KEY)
        return cls(
            task=str(config["task"]),
            reduction_factor=int(config["reduction_factor"]),
            learning_rate=float(config["learning_rate"]),
            seed=int(config["seed"]),
            sample=None if sample is None else int(sample),
        )

    def to_config(self) -> dict[str, Any]:
        config = {k: getattr(self, k) for k in GRID_KEYS}
        if self.sample is not None:
            config[SAMPLE_KEY] = self.sample
        return config


def trial_point(config: Mapping[str, Any]) -> Mapping[str, Any]:
    """A Tune trial config's settings: flat, or under `POINT_KEY` with `adapters.task_grid`."""
    return config.get(POINT_KEY, config)


def trial_id(
    task: str, reduction_factor: int, learning_rate: float, seed: int, sample: int | None = None
) -> str:
    number = "" if sample is None else f"-n{int(sample)}"
    return f"{task}{number}-rf{int(reduction_factor)}-lr{float(learning_rate):g}-s{int(seed)}"


def trial_run_name(trial: str, sweep_name: str) -> str:
    """The name of a trial's MLflow run, `<trial id>-<sweep key>` (`rte-rf16-lr0.001-s0-3f9a1c`):
    as a fusion run's `fusion-<target>-s<seed>-<key>`, it tells apart the same grid point of two
    sweeps (each sweep's trials were named by the trial id alone). The key is the first six hex
    digits of the sweep name's sha256: one per sweep, the same when it is resumed. A name only:
    the run is found again by its trial id and parent."""
    return f"{trial}-{hashlib.sha256(sweep_name.encode()).hexdigest()[:6]}"


def grid(config: PipelineConfig, tasks: tuple[str, ...]) -> list[TrialParams]:
    """Every trial of `tasks`: task × reduction factor × learning rate × seed (the task's own
    reduction factors and learning rates where `adapters.task_grid` gives them)."""
    stage = config.adapters
    return [
        TrialParams(task, rf, lr, seed)
        for task in tasks
        for rf in stage.grid_for(task).reduction_factors
        for lr in stage.grid_for(task).learning_rates
        for seed in stage.seeds
    ]


def _digest(payload: Any) -> str:
    text = json.dumps(payload, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def task_identity(config: PipelineConfig, task: str, *, by_path: bool = False) -> dict[str, Any]:
    """A task's spec as what it trains on depends on it: its name, without the paths of its
    local files, so the same files in another folder (another user's storage or checkout, data
    moved) are the same task. What the files hold is named apart by `data_sha256`, which every
    key made of this one carries beside it. A hub dataset, or a task with a file not there (no
    sha256), keeps its spec as written. `by_path`: the paths kept, as keys were made before."""
    spec = config.tasks[task]
    mapping = spec.to_mapping()
    if by_path or _local_files(spec) is None:
        return mapping
    for split in ("train", "dev"):
        entry = mapping.get(split)
        if isinstance(entry, dict):
            mapping[split] = {k: v for k, v in entry.items() if k != "path"}
    return {"name": task, **mapping}  # two tasks alike but for their files stay apart


def task_settings(config: PipelineConfig, task: str, *, by_path: bool = False) -> dict[str, Any]:
    """What decides a task's adapter: the task's settings (`task_identity`), the base model
    (and its declared layout, which places the adapters), max_length and the adapter stage
    (architecture, grid, training settings, search and scheduler)."""
    stage = config.adapters
    points = stage.grid_for(task)
    return {
        "task": task_identity(config, task, by_path=by_path),
        "base_model": config.base_model,
        **declared_layout(config),
        "max_length": config.max_length,
        "architecture": stage.architecture,
        "reduction_factors": list(points.reduction_factors),
        "learning_rates": list(points.learning_rates),
        "seeds": list(stage.seeds),
        "training": stage.training_for(task).hash_dict(),
        **search_settings(config),
    }


def declared_layout(config: PipelineConfig) -> dict[str, Any]:
    """`{"base_model_layout": {...}}` where the config declares one, else nothing: a hash of a
    config without one stays what it was before the layout was part of it."""
    layout = config.base.layout if config.base is not None else ()
    return {"base_model_layout": dict(layout)} if layout else {}


def layout_tag(config: PipelineConfig) -> str:
    """A version's `base_model_layout` tag: the declared layout as JSON, or "built-in"."""
    layout = declared_layout(config).get("base_model_layout")
    return json.dumps(layout, sort_keys=True) if layout else BUILT_IN_LAYOUT


def task_config_hash(config: PipelineConfig, task: str) -> str:
    """sha256 of `task_settings`."""
    return _digest(task_settings(config, task))


def task_config_hashes(config: PipelineConfig, task: str) -> tuple[str, ...]:
    """The config hashes a version registered for the task's current settings may carry:
    `task_config_hash`, then the one with the data files' paths in it (an adapter registered
    before the paths were left out, from the same files where they are now)."""
    current, by_path = (
        task_config_hash(config, task),
        _digest(task_settings(config, task, by_path=True)),
    )
    return (current,) if by_path == current else (current, by_path)


def data_sha256(config: PipelineConfig, task: str) -> str | None:
    """sha256 of the local files a task reads (train, then dev): the config hash leaves their
    paths out, this names them by content. None for a hub dataset or a file not there (nothing
    to compare)."""
    return spec_data_sha256(config.tasks[task])


def spec_data_sha256(spec: TaskSpec) -> str | None:
    """`data_sha256` of one task's declaration."""
    files = _local_files(spec)
    return None if files is None else combined_sha256([sha256_file(path) for path in files])


def combined_sha256(file_sha256s: list[str]) -> str:
    """One sha256 of the files whose own sha256s are given, in order (train, then dev)."""
    digest = hashlib.sha256()
    for sha in file_sha256s:
        digest.update(sha.encode())
    return digest.hexdigest()


def _local_files(spec: TaskSpec) -> list[Path] | None:
    """The files a task reads (train, then dev), when it reads local files that are all there."""
    files = []
    for source in (spec.train, spec.dev):
        if source is None:
            continue
        if spec.hub is not None or source.path is None or not Path(source.path).is_file():
            return None
        files.append(Path(source.path))
    return files


def search_settings(config: PipelineConfig) -> dict[str, Any]:
    """The search and scheduler settings that differ from the grid with FIFO (empty for those,
    so the config hashes of grid sweeps stay what they were)."""
    stage = config.adapters
    settings: dict[str, Any] = {}
    if stage.search != "grid":
        settings["search"] = stage.search
        settings["num_samples"] = stage.num_samples
        if stage.learning_rate_range is not None:
            settings["learning_rate_range"] = list(stage.learning_rate_range)
    if stage.scheduler != "fifo":
        settings["scheduler"] = stage.scheduler
        settings["asha_grace_period"] = stage.asha_grace_period
        settings["asha_reduction"] = stage.asha_reduction
    return settings


def sweep_description(
    config: PipelineConfig,
    task: str,
    sweep_name: str,
    best: tuple[str, str, float, ModelVersionInfo] | None = None,
) -> str:
    """The description of a task's sweep run: what it searches, how long each trial trains;
    `best` (trial id, metric, value, version) once the best trial is registered."""
    stage = config.adapters
    if stage.search == "grid":
        points = stage.grid_for(task)
        search = (
            f"a grid of reduction factors {list(points.reduction_factors)} × learning rates "
            f"{list(points.learning_rates)} × seeds {list(stage.seeds)}"
        )
    else:
        search = f"{stage.num_samples} trials picked by {stage.search}"
    if stage.scheduler != "fifo":
        search += f" ({stage.scheduler} may stop trials early)"
    epochs = stage.training_for(task).max_epochs
    return sweep_note(task, sweep_name, stage.architecture, config.base_model, search, epochs, best)


def sweep_hash(config_hashes: Mapping[str, str]) -> str:
    """sha256 over every adapter task's config hash: a Tune experiment is resumed only when
    it was started for the same settings."""
    return _digest(dict(sorted(config_hashes.items())))


def sweep_hashes(config: PipelineConfig) -> tuple[str, ...]:
    """The `sweep_hash` of the config's adapter tasks, then the one a sweep started before the
    data files' paths were left out of the config hashes carries (`task_config_hashes`): the
    same settings, so such an interrupted sweep is resumed."""
    tasks = config.adapter_tasks
    hashes = [task_config_hashes(config, task) for task in tasks]
    current = sweep_hash({task: found[0] for task, found in zip(tasks, hashes, strict=True)})
    by_path = sweep_hash({task: found[-1] for task, found in zip(tasks, hashes, strict=True)})
    return (current,) if by_path == current else (current, by_path)


def sweep_summary(
    config: PipelineConfig,
    task: str,
    sweep_name: str,
    best: tuple[str, str, float, ModelVersionInfo],
) -> tuple[dict[str, float], dict[str, str]]:
    """The metrics and tags of a task's sweep run once `best` (trial id, metric, value,
    version) is registered: by the registrar, or by the next plan for a run whose driver
    stopped first."""
    trial, metric, value, info = best
    note = sweep_description(config, task, sweep_name, best)
    tags = {"best_trial": trial, "registered_version": str(info.version), TAG_NOTE: note}
    return ({f"best_dev_{metric}": value} if metric and value == value else {}), tags


def registered_summary(
    config: PipelineConfig, task: str, info: ModelVersionInfo
) -> tuple[dict[str, float], dict[str, str]]:
    """`sweep_summary` from the registered version's own tags (its metric, value and trial),
    for a sweep run whose driver stopped before the registrar gave it its summary."""
    metric, trial = info.tags.get(TAG_METRIC, ""), info.tags.get(TAG_TRIAL_ID, "")
    try:
        value = float(info.tags.get(TAG_METRIC_VALUE, "nan"))
    except ValueError:
        value = float("nan")
    return sweep_summary(config, task, info.tags[TAG_SWEEP], (trial, metric, value, info))


@dataclass(frozen=True)
class SweepContext:
    """Everything a trial needs besides its grid point; plain data, shipped with the trainable."""

    config: PipelineConfig
    tracking_uri: str
    experiment_id: str
    sweep_name: str
    parent_runs: dict[str, str] = field(default_factory=dict)  # task -> sweep run id
    cpu: float = 1.0
    # the driver the trials' runs belong to (`run_driver`): it ends them KILLED on Ctrl-C
    driver: str = field(default_factory=run_driver)

    @property
    def storage(self) -> Path:
        return self.config.storage

    @property
    def tokens_dir(self) -> Path:
        return self.storage / TOKENS_DIR

    def trial_dir(self, trial: str) -> Path:
        return trials_root(self.config, self.sweep_name) / trial


def trials_root(config: PipelineConfig, sweep_name: str) -> Path:
    return config.storage / TRIALS_DIR / sweep_name
