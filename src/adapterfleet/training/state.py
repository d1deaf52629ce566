"""The loop's own bookkeeping and the random-number state, both plain data for checkpoints."""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass, field
from typing import Any

import torch


@dataclass
class LoopState:
    """Progress of `fit` that a checkpoint must carry (everything but tensors)."""

    epoch: int = 0  # epochs completed
    global_step: int = 0  # optimizer steps taken
    best_metric: float | None = None
    best_epoch: int = 0
    epochs_without_improvement: int = 0
    history: list[dict[str, float]] = field(default_factory=list)
    train_seconds: float = 0.0
    examples_seen: int = 0
    first_loss: float | None = None  # the first batch's, before any step: divergence's scale

    def record(self, metric: float, higher_is_better: bool = True) -> bool:
        """Track `metric` of the epoch just finished; True when it is a new best (the highest,
        or the lowest when not `higher_is_better`)."""
        best = self.best_metric
        if best is None or (metric > best if higher_is_better else metric < best):
            self.best_metric, self.best_epoch = metric, self.epoch
            self.epochs_without_improvement = 0
            return True
        self.epochs_without_improvement += 1
        return False

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LoopState:
        return cls(**data)


@dataclass
class RngState:
    """Python `random` and torch (CPU, and CUDA when initialised) generator states."""

    python: tuple
    torch_cpu: torch.Tensor
    torch_cuda: list[torch.Tensor]

    @classmethod
    def capture(cls) -> RngState:
        cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else []
        return cls(random.getstate(), torch.get_rng_state(), cuda)

    def restore(self) -> None:
        random.setstate(self.python)
        torch.set_rng_state(self.torch_cpu)
        if self.torch_cuda and len(self.torch_cuda) == _cuda_device_count():
            torch.cuda.set_rng_state_all(self.torch_cuda)

    def tensors(self) -> dict[str, torch.Tensor]:
        """The torch generator states as uint8 tensors, keyed for a safetensors file."""
        out = {"torch_cpu": self.torch_cpu}
        out.update({f"torch_cuda_{i}": s for i, s in enumerate(self.torch_cuda)})
        return out

    def python_json(self) -> list:
        version, internal, gauss = self.python
        return [version, list(internal), gauss]

    @classmethod
    def from_parts(cls, python_json: list, tensors: dict[str, torch.Tensor]) -> RngState:
        version, internal, gauss = python_json
        cuda_keys = sorted(
            (k for k in tensors if k.startswith("torch_cuda_")), key=lambda k: int(k[11:])
        )
        return cls(
            (version, tuple(internal), gauss),
            tensors["torch_cpu"],
            [tensors[k] for k in cuda_keys],
        )


def _cuda_device_count() -> int:
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def seed_everything(seed: int) -> None:
    """Seed Python's `random` and torch (all devices)."""
    random.seed(seed)
    torch.manual_seed(seed)
