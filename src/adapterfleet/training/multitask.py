"""MT-A: adapters of all tasks trained jointly with the base model fine-tuned.

Every epoch visits every training batch of every task once, in a shuffled order, so tasks are
sampled in proportion to their size. Each batch activates its task's adapter and head.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch
from torch import nn

from adapterfleet.adapters import (
    AdapterConfig,
    AdapterModel,
    add_adapter,
    save_adapter,
    save_base_model,
    save_head,
    set_active_adapter,
    sha256_file,
)
from adapterfleet.adapters.config import BaseModelSpec
from adapterfleet.adapters.io import ADAPTER_WEIGHTS
from adapterfleet.data import TokenizedTask
from adapterfleet.training.callbacks import Callback
from adapterfleet.training.config import MT_A_GRAPHS, TrainConfig
from adapterfleet.training.distributed import DataParallel
from adapterfleet.training.evaluation import evaluate
from adapterfleet.training.loop import fit
from adapterfleet.training.modes import (
    RunResult,
    head_for,
    metric_names,
    new_model,
    task_batches,
    write_run_file,
)
from adapterfleet.training.state import seed_everything


class MultiTaskModel(nn.Module):
    """Routes each batch through the adapter and head named by its `task` entry."""

    def __init__(self, model: AdapterModel):
        super().__init__()
        self.model = model

    def forward(self, batch: dict[str, Any]) -> torch.Tensor:
        task = batch["task"]
        set_active_adapter(self.model, task)
        self.model.select_head(task)
        return self.model(batch)


class _Tagged:
    """Re-iterable batches of one loader, each tagged with its task name."""

    def __init__(self, loaders: dict[str, Any], shuffle_seed: int | None):
        self.loaders, self.shuffle_seed = loaders, shuffle_seed

    def __iter__(self):
        batches = [{**b, "task": t} for t, loader in self.loaders.items() for b in loader]
        if self.shuffle_seed is not None:
            random.Random(self.shuffle_seed).shuffle(batches)
        return iter(batches)

    def __len__(self) -> int:
        return sum(len(loader) for loader in self.loaders.values())


def train_mt_a(
    tasks: dict[str, TokenizedTask],
    base_model: str | BaseModelSpec | nn.Module,
    config: TrainConfig,
    out_dir: str | Path,
    *,
    reduction_factor: int = 16,
    metrics: dict[str, Sequence[str]] | None = None,
    callbacks: Sequence[Callback] = (),
    resume_from: str | Path | None = None,
    device: torch.device | None = None,
) -> RunResult:
    """Train MT-A over `tasks`; writes `adapters/<task>/`, `heads/<task>/` and `model/` (rank 0
    only, data-parallel; `device` overrides the config's).

    Model selection uses the metric over every task's dev set pooled; afterwards each task's
    own dev metrics (`metrics[task]`, default accuracy) go into `lineage["task_metrics"]`.
    Steps are eager (`_eager_steps`)."""
    _refuse_regression(tasks)
    config = _eager_steps(config)
    seed_everything(config.seed)  # the new adapters and heads: one init per seed
    model = new_model(base_model)
    for name, tokenized in tasks.items():
        add_adapter(model, name, AdapterConfig("pfeiffer", reduction_factor))
        model.add_head(name, head_for(tokenized, model))
    for parameter in model.parameters():
        parameter.requires_grad_(True)
    loaders = {name: task_batches(t, config) for name, t in tasks.items()}

    def train(epoch: int) -> _Tagged:
        return _Tagged({n: pair[0](epoch) for n, pair in loaders.items()}, config.seed + epoch)

    dev = _Tagged({n: pair[1] for n, pair in loaders.items()}, None)
    wrapped = MultiTaskModel(model)
    result = fit(
        wrapped,
        list(model.parameters()),
        train,
        dev,
        config,
        callbacks=callbacks,
        resume_from=resume_from,
        device=device,
    )
    task_metrics = {
        name: evaluate(
            wrapped,
            _Tagged({name: loaders[name][1]}, None),
            metric_names((metrics or {}).get(name, ("accuracy",)), config),
        )
        for name in tasks
    }
    trainable = sum(p.numel() for p in model.parameters())
    run = RunResult("mt-a", ",".join(tasks), Path(out_dir), result, trainable, {})
    if DataParallel.current().is_main:
        _save(model, run, base_model, config, task_metrics)
    return run


def _save(
    model: nn.Module,
    run: RunResult,
    base_model: str | BaseModelSpec | nn.Module,
    config: TrainConfig,
    task_metrics: dict[str, dict[str, float]],
) -> None:
    """Write MT-A's adapters, heads, encoder and run.json into `run.out_dir`."""
    out, hashes = run.out_dir, {}
    for name in task_metrics:
        save_adapter(model, name, out / "adapters" / name)
        save_head(model, name, out / "heads" / name)
        hashes[name] = sha256_file(out / "adapters" / name / ADAPTER_WEIGHTS)
    save_base_model(model, out / "model")
    run.lineage.update(adapter_sha256=hashes, task_metrics=task_metrics)
    write_run_file(run, base_model, config)


def _eager_steps(config: TrainConfig) -> TrainConfig:
    """`config` with eager steps (`cuda_graphs: auto` included): a replayed step keeps every
    gradient it ever made allocated, so the optimizer would move every task's adapter and head
    at each batch, not only the batch's own. `true` is refused."""
    if config.cuda_graphs is True:
        raise ValueError(MT_A_GRAPHS)
    return replace(config, cuda_graphs=False)


def _refuse_regression(tasks: dict[str, TokenizedTask]) -> None:
    regression = [name for name, t in tasks.items() if t.is_regression]
    if regression:
        raise ValueError(
            f"MT-A selects on one metric over every task's dev set pooled, which a regression "
            f"task ({', '.join(regression)}) cannot join; train MT-A over classification tasks"
        )
