"""Device, precision and batch plumbing shared by training and evaluation."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import torch
from tqdm.auto import tqdm

Batch = Mapping[str, Any]
TrainBatches = Callable[[int], Iterable[Batch]] | Iterable[Batch]


def resolve_device(name: str) -> torch.device:
    """ "auto" → CUDA when available, else CPU; "cuda" without a GPU is a clear error."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("TrainConfig.device is 'cuda' but no CUDA device is available")
    return torch.device(name)


def pad_multiple(device: torch.device) -> int:
    """What batches bound for `device` pad their width to a multiple of: 8 on a CUDA device,
    where each new batch shape costs the attention a cuDNN plan of its own (0.2-0.5 s on an
    H200), so RTE's 54 widths at 32 examples made a first epoch of 27.7 s where 14 widths make
    4.5 s (benchmarks/RESULTS.md, "GPU check"); 1 elsewhere, where padding is only more work."""
    return 8 if device.type == "cuda" else 1


# The half-precision autocast dtypes a TrainConfig.precision names.
HALF_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


def autocast_dtype(precision: str, device: torch.device) -> torch.dtype | None:
    """The dtype to autocast to, None for float32. "fp32": none; "bf16" on any device; "fp16"
    on CUDA (the loop then scales the loss); "auto": on CUDA bf16 where the GPU has it (Ampere
    and newer), else fp16, and float32 on a CPU, the reference implementation's numerics (bf16
    pays on CPUs with native bf16 instructions, AVX512-BF16 or AMX: ask for it)."""
    if precision == "fp32" or (precision == "auto" and device.type != "cuda"):
        return None
    if precision == "auto":
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    if precision == "fp16" and device.type != "cuda":
        raise ValueError(
            f"TrainConfig.precision 'fp16' needs a CUDA device, got {device.type}; "
            "use bf16 (or fp32) on a CPU"
        )
    return HALF_DTYPES[precision]


def use_bf16(precision: str, device: torch.device) -> bool:
    """Whether `precision` autocasts to bfloat16 on `device`."""
    return autocast_dtype(precision, device) == torch.bfloat16


def autocast(
    device: torch.device, dtype: torch.dtype | None, cache: bool = True
) -> contextlib.AbstractContextManager:
    """Autocast to `dtype` when one is given (weights and gradients stay float32), otherwise
    a no-op. `cache=False` casts the weights at every use (what a CUDA graph capture needs)."""
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=dtype, cache_enabled=cache)


def to_device(batch: Batch, device: torch.device) -> dict[str, Any]:
    """A copy of `batch` with every tensor on `device` (other values pass through); copies
    from pinned memory do not block."""
    return {
        k: v.to(device, non_blocking=v.is_pinned()) if isinstance(v, torch.Tensor) else v
        for k, v in batch.items()
    }


def logits_of(output: Any) -> torch.Tensor:
    """The logits a model returned: a tensor, or an object / mapping with a `logits` entry."""
    if isinstance(output, torch.Tensor):
        return output
    if isinstance(output, Mapping) and "logits" in output:
        return output["logits"]
    if hasattr(output, "logits"):
        return output.logits
    raise TypeError(f"model(batch) must return logits, got {type(output).__name__}")


def progress(batches: Iterable[Batch], desc: str, enabled: bool) -> Iterable[Batch]:
    """A tqdm bar over `batches` when enabled, else `batches` passed through a disabled bar."""
    total = len(batches) if hasattr(batches, "__len__") else None
    return tqdm(batches, total=total, desc=desc, disable=not enabled, leave=False)


def batch_size_of(batch: Batch) -> int:
    """Number of examples in a batch (the length of its labels)."""
    if "labels" not in batch:
        raise KeyError(f"batch has no 'labels' key (keys: {sorted(batch)})")
    return int(batch["labels"].shape[0])


def rows_in(batches: Iterable[Batch]) -> int | None:
    """The examples an epoch's `batches` hold, where that is known without iterating them: a
    list or tuple of batches, a DataLoader over a sized dataset that keeps its short last batch;
    else None."""
    if isinstance(batches, list | tuple):
        return sum(batch_size_of(batch) for batch in batches)
    dataset = getattr(batches, "dataset", None)
    if dataset is None or not hasattr(dataset, "__len__"):
        return None
    sampler = getattr(batches, "batch_sampler", None)
    if getattr(batches, "drop_last", False) or getattr(sampler, "drop_last", False):
        return None
    return len(dataset)


def require_reiterable(batches: Iterable, name: str) -> None:
    """Refuse one-shot iterators (a generator would be empty from the second epoch on)."""
    if iter(batches) is batches:
        raise TypeError(
            f"{name} must be re-iterable (a list, a DataLoader, or for training a callable "
            f"epoch -> batches), not a one-shot iterator"
        )


def checked_params(
    model: torch.nn.Module, trainable_params: Iterable[torch.nn.Parameter]
) -> list[torch.nn.Parameter]:
    params = list(trainable_params)
    if not params:
        raise ValueError("trainable_params is empty: nothing to train")
    in_model = {id(p) for p in model.parameters()}
    seen: set[int] = set()
    for index, param in enumerate(params):
        if id(param) not in in_model:
            raise ValueError(f"trainable_params[{index}] is not a parameter of the model")
        if id(param) in seen:
            raise ValueError(f"trainable_params[{index}] is listed twice")
        if not param.requires_grad:
            raise ValueError(f"trainable_params[{index}] has requires_grad=False")
        seen.add(id(param))
    return params


def epoch_source(train_batches: TrainBatches) -> Callable[[int], Iterable[Batch]]:
    if callable(train_batches):
        return train_batches
    require_reiterable(train_batches, "train_batches")
    return lambda epoch: train_batches


def count_batches(epoch_batches: Callable[[int], Iterable[Batch]]) -> int:
    """Batches per epoch (from epoch 1), to size the LR schedule; iterates once if no len()."""
    batches = epoch_batches(1)
    count = len(batches) if hasattr(batches, "__len__") else sum(1 for _ in batches)
    if count == 0:
        raise ValueError("train_batches yields no batches")
    return count
