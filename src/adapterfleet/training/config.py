"""The validated configuration of one training run (plain data, no torch)."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from adapterfleet.errors import unknown_keys
from adapterfleet.training.metrics import DEFAULT_METRIC, METRICS, METRICS_BY_KIND
from adapterfleet.training.metrics import higher_is_better as higher_is_better  # for config/

PRECISIONS = ("auto", "fp32", "bf16", "fp16")
DEVICES = ("auto", "cpu", "cuda")
# MT-A steps stay eager: a replayed step keeps its gradients allocated, so the optimizer would
# move every task's adapter and head at each batch, not only the batch's own
MT_A_GRAPHS = (
    "cuda_graphs: true cannot train MT-A: each batch trains its own task's adapter and head, "
    "and with replayed steps the optimizer would move the other tasks' too; set cuda_graphs: "
    "auto (MT-A then trains eagerly) or false"
)
# field -> the values left out of hash_dict: first the one a config written before the field
# ran with, then any later default that trains the same
LATER_FIELDS: dict[str, tuple[Any, ...]] = {"min_epochs": (1,), "cuda_graphs": (False, "auto")}
MAX_SEED = 2**32 - 1  # what every seeded generator (random, torch, numpy) accepts


@dataclass(frozen=True)
class TrainConfig:
    """Hyperparameters of `fit`; every field is checked when the config is built.

    `batch_size` / `eval_batch_size` are carried for the data layer that builds the batches;
    the loop itself consumes whatever batches it is given.
    """

    learning_rate: float = 1e-4
    max_epochs: int = 10
    batch_size: int = 32
    eval_batch_size: int = 64
    warmup_ratio: float = 0.0
    weight_decay: float = 0.0
    grad_accum_steps: int = 1
    patience: int | None = None
    min_epochs: int = 1  # early stopping waits for these (max_epochs still ends training)
    metric: str = "accuracy"
    seed: int = 0
    max_grad_norm: float | None = 1.0
    precision: str = "auto"
    device: str = "auto"
    # replay each batch shape's step as a CUDA graph (training/graphs); auto: wherever it can run
    cuda_graphs: bool | str = "auto"
    progress: bool = False

    def __post_init__(self) -> None:
        _positive_float("learning_rate", self.learning_rate)
        _int_at_least("max_epochs", self.max_epochs, 1)
        _int_at_least("batch_size", self.batch_size, 1)
        _int_at_least("eval_batch_size", self.eval_batch_size, 1)
        _float_in_range("warmup_ratio", self.warmup_ratio, 0.0, 1.0)
        _float_in_range("weight_decay", self.weight_decay, 0.0, math.inf)
        if self.weight_decay == math.inf:  # AdamW would turn every weight into nan
            raise ValueError("TrainConfig.weight_decay must be a finite number >= 0.0, got inf")
        _int_at_least("grad_accum_steps", self.grad_accum_steps, 1)
        if self.patience is not None:
            _int_at_least("patience", self.patience, 1, suffix=" or null (off; None in Python)")
        _int_at_least("min_epochs", self.min_epochs, 1)
        _known_metric(self.metric)
        _int_at_least("seed", self.seed, 0)
        if self.seed > MAX_SEED:
            raise ValueError(f"TrainConfig.seed must be an integer <= {MAX_SEED}, got {self.seed}")
        if self.max_grad_norm is not None:
            _positive_float("max_grad_norm", self.max_grad_norm, suffix=" or None (no clipping)")
        _choice("precision", self.precision, PRECISIONS)
        _choice("device", self.device, DEVICES)
        if not isinstance(self.progress, bool):
            raise ValueError(f"TrainConfig.progress must be true or false, got {self.progress!r}")
        if self.cuda_graphs != "auto" and not isinstance(self.cuda_graphs, bool):
            raise ValueError(
                f"TrainConfig.cuda_graphs must be auto, true or false, got {self.cuda_graphs!r}"
            )
        if self.cuda_graphs is True and (self.device == "cpu" or self.precision == "fp16"):
            field = "device: cpu" if self.device == "cpu" else "precision: fp16"
            raise ValueError(
                f"TrainConfig.cuda_graphs needs a CUDA device and no fp16 loss scaling, got "
                f"{field}; set cuda_graphs: false, or device: cuda with precision bf16/fp32/auto"
            )

    def patience_note(self, stop_reason: str | None, epochs_run: int | None) -> str:
        """`, patience 3 ended it at epoch 9/30` for a fit early stopping ended, else ""."""
        if stop_reason != "early_stopping":
            return ""
        return f", patience {self.patience} ended it at epoch {epochs_run}/{self.max_epochs}"

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of every field."""
        return dataclasses.asdict(self)

    def run_params(self) -> dict[str, Any]:
        """The settings a run logs, as `train.<field>`: every field but `progress` (how progress
        is shown, not a setting of the run)."""
        return {f"train.{k}": v for k, v in self.to_dict().items() if k != "progress"}

    def hash_dict(self) -> dict[str, Any]:
        """`to_dict()` less the fields added after config hashes were first written, while they
        hold their defaults (`LATER_FIELDS`): the hash of a config that does not use them stays
        what it was."""
        values = self.to_dict()
        for name, unhashed in LATER_FIELDS.items():
            if values[name] in unhashed:
                del values[name]
        return values

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainConfig:
        """Build from a dict; unknown keys are refused (they are usually typos)."""
        fields = [f.name for f in dataclasses.fields(cls)]
        unknown = sorted(set(data) - set(fields), key=str)
        if unknown:
            raise ValueError(f"TrainConfig: {unknown_keys(unknown, fields)}")
        return cls(**data)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _positive_float(name: str, value: Any, suffix: str = "") -> None:
    if not _is_number(value) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"TrainConfig.{name} must be a number > 0{suffix}, got {value!r}")


def _float_in_range(name: str, value: Any, low: float, high: float) -> None:
    if not _is_number(value) or math.isnan(value) or not low <= value <= high:
        bounds = f">= {low}" if math.isinf(high) else f"in [{low}, {high}]"
        raise ValueError(f"TrainConfig.{name} must be a number {bounds}, got {value!r}")


def _int_at_least(name: str, value: Any, low: int, suffix: str = "") -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < low:
        raise ValueError(f"TrainConfig.{name} must be an integer >= {low}{suffix}, got {value!r}")


def _choice(name: str, value: Any, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ValueError(f"TrainConfig.{name} must be one of {list(allowed)}, got {value!r}")


def _known_metric(value: Any) -> None:
    _choice("metric", value, tuple(METRICS))


def task_metric(kind: str, num_labels: int, name: str | None) -> str:
    """The metric `name` as a task of type `kind` records it, or the type's default for None:
    `f1` on more than two classes is macro-F1, recorded as `f1_macro`. A name that is unknown
    or does not fit the type is a ValueError naming the metrics the type has."""
    if name is None:
        return DEFAULT_METRIC[kind]
    fits = METRICS_BY_KIND[kind]
    if name not in fits:
        problem = "is unknown" if name not in METRICS else f"does not fit a {kind} task"
        raise ValueError(f"{name!r} {problem}; metrics for {kind} tasks: {', '.join(fits)}")
    return "f1_macro" if name == "f1" and num_labels > 2 else name
