"""One-machine entry points: `adapterfleet train / fuse / evaluate`; no Ray, no MLflow."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from adapterfleet.adapters import (
    AdapterModel,
    load_adapter,
    load_encoder,
    load_head,
    load_tokenizer,
    set_active_adapter,
)
from adapterfleet.config import BaseModelSpec, ConfigError, PipelineConfig, training_with
from adapterfleet.data import TokenizedTask, load_task, tokenize_task
from adapterfleet.fusion import FusionConfig, load_fusion, set_active_fusion
from adapterfleet.orchestration.limits import check_single_run
from adapterfleet.training import Callback, TrainConfig, evaluate
from adapterfleet.training.modes import (
    RUN_FILE,
    RunResult,
    mode_adapter,
    task_batches,
    train_fusion_run,
    train_single,
)
from adapterfleet.training.multitask import train_mt_a


def prepare_task(config: PipelineConfig, task: str, tokenizer: Any = None) -> TokenizedTask:
    """Load and tokenise one task of the config, through the shared cache under storage."""
    if task not in config.tasks:
        known = ", ".join(sorted(config.tasks))
        raise ConfigError(f"task {task!r} is not a task of the config; tasks there: {known}")
    tokenizer = tokenizer or load_tokenizer(config.base_model)
    data = load_task(config.tasks[task])
    return tokenize_task(data, tokenizer, config.max_length, config.tokens_dir)


def adapter_training(config: PipelineConfig, task: str, **changes: Any) -> TrainConfig:
    """The training settings of `task` (with its `task_training`), then the given changes
    (None values are ignored, as for CLI options left out; a value out of range is refused
    naming the option)."""
    return training_with(config.adapters.training_for(task), **changes)


def train_task(
    config: PipelineConfig,
    task: str,
    mode: str,
    out_dir: Path,
    *,
    reduction_factor: int | None = None,
    train_config: TrainConfig | None = None,
    callbacks: Sequence[Callback] = (),
) -> RunResult:
    check_single_run(config, task, mode=mode, reduction_factor=reduction_factor)
    tokenized = prepare_task(config, task)
    train_config = train_config or config.adapters.training_for(task)
    metrics = config.tasks[task].metrics
    if mode == "mt-a":
        tasks = {name: prepare_task(config, name) for name in config.adapter_tasks}
        return train_mt_a(
            tasks,
            config.base,
            train_config,
            out_dir,
            reduction_factor=reduction_factor or config.adapters.reduction_factors[0],
            metrics={name: config.tasks[name].metrics for name in tasks},
            callbacks=callbacks,
        )
    reduction_factor = reduction_factor or config.adapters.grid_for(task).reduction_factors[0]
    return train_single(
        mode,
        tokenized,
        config.base,
        train_config,
        out_dir,
        adapter=mode_adapter(mode, reduction_factor),
        metrics=metrics,
        callbacks=callbacks,
    )


def fuse_task(
    config: PipelineConfig,
    target: str,
    adapter_dirs: Sequence[Path],
    out_dir: Path,
    *,
    train_config: TrainConfig | None = None,
    base_model: str | BaseModelSpec | None = None,
    callbacks: Sequence[Callback] = (),
) -> RunResult:
    check_single_run(config, target, option="--target")
    tokenized = prepare_task(config, target)
    return train_fusion_run(
        tokenized,
        base_model or config.base,
        adapter_dirs,
        train_config or config.fusion.training_for(target),
        out_dir,
        fusion_config=FusionConfig.preset(config.fusion.preset),
        metrics=config.tasks[target].metrics,
        callbacks=callbacks,
    )


def evaluate_run(config: PipelineConfig, task: str, run_dir: Path) -> dict[str, float]:
    """Dev metrics of a saved run directory (adapter or fusion, with its head) on `task`: on the
    config's `training.device`, in the precision the run trained and evaluated in (its run.json;
    float32 for fp16 off a GPU), so they are the run's own dev metrics."""
    from adapterfleet.training.predict import prediction_dtype
    from adapterfleet.training.runtime import resolve_device

    check_single_run(config, task)
    run_dir = Path(run_dir)
    info = json.loads((run_dir / RUN_FILE).read_text()) if (run_dir / RUN_FILE).is_file() else {}
    base = (run_dir / "model") if (run_dir / "model").is_dir() else config.base
    model = AdapterModel(load_encoder(base if not isinstance(base, Path) else str(base)))
    head = load_head(model, run_dir / "head", name=task)
    model.select_head(head)
    if (run_dir / "fusion").is_dir():
        for adapter_dir in info.get("lineage", {}).get("adapter_dirs", []):
            load_adapter(model, adapter_dir)
        set_active_fusion(model, load_fusion(model, run_dir / "fusion", name=task))
    elif (run_dir / "adapter").is_dir():
        set_active_adapter(model, load_adapter(model, run_dir / "adapter", name=task))
    tokenized = prepare_task(config, task)
    training = config.adapters.training_for(task)
    _, dev = task_batches(tokenized, training)
    names = list(dict.fromkeys([training.metric, *config.tasks[task].metrics]))
    device = resolve_device(training.device)
    precision = info.get("train_config", {}).get("precision", training.precision)
    dtype = prediction_dtype(precision, device)
    return evaluate(model.to(device).eval(), dev, names, device=device, dtype=dtype)
