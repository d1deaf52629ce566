"""The rows of the paper's Table 1 as training modes over one fit loop.

`head` (only the task head), `full` (every weight), `st-a` (a Pfeiffer adapter), `st-a-houlsby`,
`fusion` (a fusion layer over saved adapters; base and adapters frozen, V regulariser applied) and
`mt-a` (see `multitask.py`). Each run writes a run directory:

    run.json   mode, task, base model, settings, dev metrics, per-epoch history, lineage
    adapter/   adapter_config.json + adapter.safetensors          (st-a, st-a-houlsby)
    fusion/    adapter_fusion_config.json + model_adapter_fusion.safetensors   (fusion)
    head/      head_config.json + model_head.safetensors          (every mode)
    model/     the fine-tuned encoder, safetensors                (full)
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from adapterfleet.adapters import (
    MINILM,
    AdapterConfig,
    AdapterModel,
    HeadConfig,
    add_adapter,
    load_adapter,
    load_encoder,
    save_adapter,
    save_base_model,
    save_head,
    sha256_file,
    train_adapter,
)
from adapterfleet.adapters.architectures import default_head_dropout, default_pooling
from adapterfleet.adapters.config import DEFAULT_REDUCTION_FACTOR, HEAD_DROPOUT, BaseModelSpec
from adapterfleet.adapters.io import ADAPTER_WEIGHTS
from adapterfleet.adapters.model import train_only
from adapterfleet.data import TokenizedTask, make_dataloader
from adapterfleet.data.cache import tokens_sha256
from adapterfleet.fusion import (
    FusionConfig,
    add_fusion,
    fusion_regularization_loss,
    save_fusion,
    train_fusion,
)
from adapterfleet.training.callbacks import Callback, FitResult
from adapterfleet.training.config import TrainConfig
from adapterfleet.training.distributed import DataParallel
from adapterfleet.training.loop import LossFn, default_loss, fit
from adapterfleet.training.runtime import pad_multiple
from adapterfleet.training.state import seed_everything

# The single-task adapter rows of Table 1 and the architecture each trains.
ADAPTER_MODES = {"st-a": "pfeiffer", "st-a-houlsby": "houlsby"}
SINGLE_TASK_MODES = ("head", "full", *ADAPTER_MODES)
RUN_FILE = "run.json"


@dataclass
class RunResult:
    mode: str
    task: str
    out_dir: Path
    fit: FitResult
    trainable_parameters: int
    lineage: dict[str, Any] = field(default_factory=dict)
    model: nn.Module | None = field(default=None, repr=False)  # the trained model, best state

    @property
    def dev_metrics(self) -> dict[str, float]:
        return self.fit.best_metrics


def head_for(tokenized: TokenizedTask, model: nn.Module | None = None) -> HeadConfig:
    """The task's head; it pools as the task says, else as the base model's family does (the
    first token when no model is given), with the base model's dropout (`default_head_dropout`)."""
    pooling = tokenized.pooling or (default_pooling(model) if model is not None else "cls")
    shared = {
        "pooling": pooling,
        "dropout": default_head_dropout(model) if model is not None else HEAD_DROPOUT,
    }
    if tokenized.is_regression:
        value_range = list(tokenized.value_range) if tokenized.value_range else None
        return HeadConfig("regression", 1, value_range=value_range, **shared)
    if tokenized.is_multiple_choice:
        return HeadConfig("multiple_choice", tokenized.num_labels, **shared)
    return HeadConfig(
        num_labels=tokenized.num_labels, label_names=list(tokenized.label_names), **shared
    )


def head_loss(head: HeadConfig) -> LossFn | None:
    """The loss of a regression head: mean squared error on its range mapped to [0, 1] (the
    error divided by the range's width), so a 0-5 score trains like a 0-1 one. None (the fit
    loop's cross-entropy) for the other heads."""
    if head.head_type != "regression":
        return None
    _, width = head.regression_scale

    def loss(outputs: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return default_loss(outputs / width, labels / width)

    return loss


def task_batches(tokenized: TokenizedTask, config: TrainConfig) -> tuple[Any, Any]:
    """(epoch -> length-grouped shuffled train batches, sorted dev batches); when they go to a
    GPU, in pinned memory and padded to a multiple of 8 (`pad_multiple`)."""
    pad, seed = tokenized.pad_token_id, config.seed
    pin = config.device != "cpu" and torch.cuda.is_available()
    multiple = pad_multiple(torch.device("cuda" if pin else "cpu"))
    gpu = {"pin_memory": pin, "pad_to_multiple_of": multiple}

    def train(epoch: int) -> Any:
        return make_dataloader(tokenized.train, config.batch_size, True, seed, pad, epoch, **gpu)

    dev = make_dataloader(tokenized.dev, config.eval_batch_size, False, seed, pad, **gpu)
    return train, dev


def metric_names(tokenized_metrics: Sequence[str], config: TrainConfig) -> list[str]:
    return list(dict.fromkeys([config.metric, *tokenized_metrics]))


def new_model(base_model: str | BaseModelSpec | nn.Module) -> AdapterModel:
    encoder = (
        load_encoder(base_model) if isinstance(base_model, str | BaseModelSpec) else base_model
    )
    return AdapterModel(encoder)


def mode_adapter(
    mode: str, reduction_factor: int = DEFAULT_REDUCTION_FACTOR, architecture: str | None = None
) -> AdapterConfig | None:
    """The adapter a single-task mode trains: None for `head` and `full`. `architecture`: the
    one `st-a` trains (a pipeline's `adapters.architecture`), Pfeiffer's when not given."""
    if mode not in ADAPTER_MODES:
        return None
    chosen = architecture if mode == "st-a" and architecture else ADAPTER_MODES[mode]
    return AdapterConfig(chosen, reduction_factor)


def adapter_mode(adapter: AdapterConfig) -> str:
    """The row of Table 1 a run of `adapter` is (run.json's `mode`): st-a or st-a-houlsby."""
    return "st-a-houlsby" if adapter.architecture == ADAPTER_MODES["st-a-houlsby"] else "st-a"


def _checked_adapter(mode: str, adapter: AdapterConfig | None) -> AdapterConfig | None:
    """The adapter `mode` trains (its default one when not given); a mode that trains no
    adapter, or another architecture than the one given, is refused."""
    if mode not in SINGLE_TASK_MODES:
        raise ValueError(
            f"mode {mode!r} is not a single-task mode; use {', '.join(SINGLE_TASK_MODES)}"
        )
    if mode not in ADAPTER_MODES:
        if adapter is not None:
            raise ValueError(f"mode {mode!r} trains no adapter; use st-a")
        return None
    adapter = adapter or mode_adapter(mode)
    if mode != "st-a" and adapter_mode(adapter) != mode:
        wanted, got = ADAPTER_MODES[mode], adapter.architecture
        raise ValueError(f"mode {mode!r} trains a {wanted} adapter, not a {got} one")
    return adapter


def train_single(
    mode: str,
    tokenized: TokenizedTask,
    base_model: str | BaseModelSpec | nn.Module,
    config: TrainConfig,
    out_dir: str | Path,
    *,
    adapter: AdapterConfig | None = None,
    metrics: Sequence[str] = ("accuracy",),
    callbacks: Sequence[Callback] = (),
    resume_from: str | Path | None = None,
    device: torch.device | None = None,
) -> RunResult:
    """Train one task and save its run directory: `head` (the head only), `full` (every
    weight) or `st-a` with `adapter` (any architecture; run.json then names the run by it).
    `st-a-houlsby` is st-a with a Houlsby adapter. Without `adapter`, an adapter mode trains
    the reduction factor 16 of Table 1. `device` overrides the config's; data-parallel (inside
    a `torch.distributed` group) only rank 0 writes the run directory."""
    adapter = _checked_adapter(mode, adapter)
    seed_everything(config.seed)  # the new head and adapter: one init per seed, whatever ran before
    model = new_model(base_model)
    name = tokenized.name
    head = head_for(tokenized, model)
    model.add_head(name, head)
    if adapter is not None:
        add_adapter(model, name, adapter)
        trainable = train_adapter(model, name)
    else:
        encoder = list(model.encoder_model.parameters()) if mode == "full" else []
        trainable = train_only(model, encoder, name)
    train, dev = task_batches(tokenized, config)
    result = fit(
        model,
        trainable,
        train,
        dev,
        config,
        loss_fn=head_loss(head),
        callbacks=callbacks,
        resume_from=resume_from,
        metric_names=metric_names(metrics, config),
        device=device,
    )
    out = Path(out_dir)
    row = adapter_mode(adapter) if adapter is not None else mode
    run = RunResult(row, name, out, result, sum(p.numel() for p in trainable), {}, model)
    if not DataParallel.current().is_main:
        return run
    save_head(model, name, out / "head")
    if adapter is not None:
        save_adapter(model, name, out / "adapter")
        run.lineage["adapter_sha256"] = sha256_file(out / "adapter" / ADAPTER_WEIGHTS)
        run.lineage["adapter"] = adapter.to_dict()
    if mode == "full":
        save_base_model(model, out / "model")
    write_run_file(run, base_model, config, tokenized)
    return run


def train_fusion_run(
    tokenized: TokenizedTask,
    base_model: str | BaseModelSpec | nn.Module,
    adapter_dirs: Sequence[str | Path],
    config: TrainConfig,
    out_dir: str | Path,
    *,
    fusion_config: FusionConfig | None = None,
    adapter_sha256: Sequence[str | None] | None = None,
    metrics: Sequence[str] = ("accuracy",),
    callbacks: Sequence[Callback] = (),
    resume_from: str | Path | None = None,
    device: torch.device | None = None,
) -> RunResult:
    """Train a fusion for `tokenized.name` over the saved adapters in `adapter_dirs`. `device`
    overrides the config's; data-parallel only rank 0 writes the run directory."""
    seed_everything(config.seed)  # the new fusion layers and head: one init per seed
    model = new_model(base_model)
    hashes = list(adapter_sha256 or [None] * len(adapter_dirs))
    names = [load_adapter(model, d, sha256=h) for d, h in zip(adapter_dirs, hashes, strict=True)]
    target = tokenized.name
    fusion_config = fusion_config or FusionConfig()
    add_fusion(model, target, names, fusion_config)
    head = head_for(tokenized, model)
    model.add_head(target, head)
    trainable = train_fusion(model, target)
    train, dev = task_batches(tokenized, config)
    regularised = fusion_config.regularization and fusion_config.value
    result = fit(
        model,
        trainable,
        train,
        dev,
        config,
        loss_fn=head_loss(head),
        extra_loss=(lambda: fusion_regularization_loss(model, target)) if regularised else None,
        callbacks=callbacks,
        resume_from=resume_from,
        metric_names=metric_names(metrics, config),
        device=device,
    )
    out = Path(out_dir)
    trained = sum(p.numel() for p in trainable)
    if not DataParallel.current().is_main:
        return RunResult("fusion", target, out, result, trained, {}, model)
    save_fusion(model, target, out / "fusion")
    save_head(model, target, out / "head")
    lineage = {
        "adapters": names,
        "adapter_dirs": [str(Path(d).resolve()) for d in adapter_dirs],
        "adapter_sha256": [sha256_file(Path(d) / ADAPTER_WEIGHTS) for d in adapter_dirs],
    }
    run = RunResult("fusion", target, out, result, trained, lineage, model)
    write_run_file(run, base_model, config, tokenized)
    return run


def read_run_file(out_dir: Path) -> RunResult:
    """The `RunResult` (without the model) of a run directory written by `write_run_file`."""
    data = json.loads((Path(out_dir) / RUN_FILE).read_text())
    return RunResult(
        data["mode"], data["task"], Path(out_dir), FitResult(**data["fit"]),
        data["trainable_parameters"], data["lineage"],
    )  # fmt: skip


def write_run_file(
    run: RunResult,
    base_model: str | BaseModelSpec | nn.Module,
    config: TrainConfig,
    tokenized: TokenizedTask | None = None,
) -> Path:
    """run.json: what the run is, what it trained on and with, its metrics and lineage; with
    `tokenized`, the dev rows its metrics were measured on (their tokens' sha256, `evaluate`'s
    check that it scores the same rows)."""
    base = (
        base_model
        if isinstance(base_model, str | BaseModelSpec)
        else getattr(getattr(base_model, "config", None), "_name_or_path", "")
    )
    name = str(base)
    if name != MINILM and os.path.isdir(name):  # a local folder: found from any other folder
        name = str(Path(name).resolve())
    payload = {
        "mode": run.mode,
        "task": run.task,
        "base_model": name,
        **({"base_model_dtype": _dtype(base_model)} if _dtype(base_model) else {}),
        **({"base_model_layout": dict(base.layout)} if isinstance(base, BaseModelSpec) else {}),
        "train_config": config.to_dict(),
        "dev_metrics": run.dev_metrics,
        "trainable_parameters": run.trainable_parameters,
        "fit": run.fit.to_dict(),
        "lineage": run.lineage,
    }
    if tokenized is not None:
        dev = tokenized.dev
        rows = {"rows": len(dev.labels), "max_length": tokenized.max_length}
        payload["dev"] = {**rows, "sha256": tokens_sha256(dev)}
    path = run.out_dir / RUN_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=2) + "\n")
    return path


def _dtype(base_model: str | BaseModelSpec | nn.Module) -> str | None:
    """The dtype the base was loaded in, as `base_model_dtype` names it (`auto`: the
    checkpoint's own); None for a model handed in loaded, whose setting is not known."""
    if isinstance(base_model, BaseModelSpec):
        return base_model.dtype
    return "auto" if isinstance(base_model, str) else None
