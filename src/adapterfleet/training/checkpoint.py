"""Resumable checkpoints of `fit`: safetensors for tensors, JSON for the rest; no pickle.

Layout of a checkpoint directory (tensors keyed by their index in `trainable_params`):

    trainer_state.json       loop progress, history, config, scheduler step, Python RNG state
    trainable.safetensors    "0", "1", ...: the current trainable tensors
    best.safetensors         "0", "1", ...: the trainable tensors of the best epoch
    optimizer.safetensors    "exp_avg.0", "exp_avg_sq.0", "step.0", ...: AdamW state per index
    rng.safetensors          "torch_cpu" (+ "torch_cuda_<i>"): torch generator states (uint8)

`trainer_state.json` is written last, so its presence marks a complete checkpoint.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file
from torch.optim.lr_scheduler import LambdaLR

from adapterfleet.training.config import LATER_FIELDS, TrainConfig
from adapterfleet.training.optim import set_scheduler_step
from adapterfleet.training.state import LoopState, RngState

STATE_FILE = "trainer_state.json"
TRAINABLE_FILE = "trainable.safetensors"
BEST_FILE = "best.safetensors"
OPTIMIZER_FILE = "optimizer.safetensors"
RNG_FILE = "rng.safetensors"
FORMAT_VERSION = 1
# Fields that may differ between the run that wrote a checkpoint and the one resuming it.
RESUMABLE_CHANGES = frozenset({"progress", "device", "precision", "cuda_graphs"})


@dataclass
class TrainingParts:
    """The live objects a checkpoint is taken from and restored into."""

    params: Sequence[torch.nn.Parameter]
    optimizer: torch.optim.Optimizer
    scheduler: LambdaLR
    config: TrainConfig


def save_checkpoint(
    directory: Path, parts: TrainingParts, state: LoopState, best: list[torch.Tensor], rng: RngState
) -> Path:
    """Write the checkpoint files into `directory` (created if needed) and return it."""
    directory.mkdir(parents=True, exist_ok=True)
    _save_tensors(directory / TRAINABLE_FILE, dict(enumerate(parts.params)))
    _save_tensors(directory / BEST_FILE, dict(enumerate(best)))
    _save_tensors(directory / OPTIMIZER_FILE, _optimizer_tensors(parts))
    _save_tensors(directory / RNG_FILE, rng.tensors())
    meta = {
        "format_version": FORMAT_VERSION,
        **state.to_dict(),
        "scheduler_last_epoch": parts.scheduler.last_epoch,
        "python_random_state": rng.python_json(),
        "config": parts.config.to_dict(),
    }
    _atomic_write(directory / STATE_FILE, json.dumps(meta, indent=2).encode())
    return directory


def load_checkpoint(directory: Path, parts: TrainingParts) -> tuple[LoopState, list[torch.Tensor]]:
    """Restore params, optimizer, scheduler and RNGs from `directory`; return state and best."""
    state_path = Path(directory) / STATE_FILE
    if not state_path.is_file():
        raise FileNotFoundError(f"no checkpoint at {directory}: {STATE_FILE} is missing")
    meta = json.loads(state_path.read_text())
    _check_config(meta.pop("config"), parts.config)
    trainable = _load_indexed(directory / TRAINABLE_FILE, parts.params)
    best = _load_indexed(directory / BEST_FILE, parts.params)
    with torch.no_grad():
        for param, value in zip(parts.params, trainable, strict=True):
            param.copy_(value)
    _restore_optimizer(load_file(directory / OPTIMIZER_FILE), parts)
    set_scheduler_step(parts.scheduler, meta.pop("scheduler_last_epoch"))
    RngState.from_parts(meta.pop("python_random_state"), load_file(directory / RNG_FILE)).restore()
    meta.pop("format_version")
    best = [value.to(param.device) for value, param in zip(best, parts.params, strict=True)]
    return LoopState.from_dict(meta), best


def _save_tensors(path: Path, tensors: dict) -> None:
    data = {str(k): v.detach().cpu().contiguous() for k, v in tensors.items()}
    tmp = path.with_name(path.name + ".tmp")
    save_file(data, tmp)
    os.replace(tmp, path)


def _atomic_write(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def _optimizer_tensors(parts: TrainingParts) -> dict[str, torch.Tensor]:
    out = {}
    for index, param in enumerate(parts.params):
        for key, value in parts.optimizer.state.get(param, {}).items():
            out[f"{key}.{index}"] = torch.as_tensor(value)
    return out


def _restore_optimizer(tensors: dict[str, torch.Tensor], parts: TrainingParts) -> None:
    parts.optimizer.state.clear()
    for name, value in tensors.items():
        key, index = name.rsplit(".", 1)
        param = parts.params[int(index)]
        # AdamW keeps `step` as a CPU float tensor; the moments follow the parameter.
        moved = value if key == "step" else value.to(device=param.device, dtype=param.dtype)
        parts.optimizer.state[param][key] = moved


def _load_indexed(path: Path, params: Sequence[torch.nn.Parameter]) -> list[torch.Tensor]:
    tensors = load_file(path)
    if len(tensors) != len(params):
        raise ValueError(f"{path} holds {len(tensors)} tensors, but fit has {len(params)} params")
    out = []
    for index, param in enumerate(params):
        value = tensors[str(index)]
        if value.shape != param.shape:
            raise ValueError(
                f"{path}: tensor {index} has shape {tuple(value.shape)}, "
                f"the trainable parameter has {tuple(param.shape)}"
            )
        out.append(value)
    return out


def _check_config(saved: dict, config: TrainConfig) -> None:
    current = config.to_dict()
    ran_with = {name: values[0] for name, values in LATER_FIELDS.items()}
    saved = {**ran_with, **saved}  # written before those fields: it ran with their defaults
    differ = sorted(k for k in current if k not in RESUMABLE_CHANGES and saved.get(k) != current[k])
    if differ:
        raise ValueError(f"cannot resume: config differs from the checkpoint's in {differ}")
