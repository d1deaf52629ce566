"""`fit`: train the given parameters of a model, evaluate every epoch, keep and restore the best."""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch

from adapterfleet.errors import JobFailed
from adapterfleet.training.callbacks import (
    Callback,
    EpochReport,
    FitResult,
    ProgressClock,
    progress_interval,
)
from adapterfleet.training.checkpoint import TrainingParts, load_checkpoint, save_checkpoint
from adapterfleet.training.config import TrainConfig
from adapterfleet.training.distributed import DataParallel
from adapterfleet.training.evaluation import evaluate
from adapterfleet.training.graphs import StepGraphs
from adapterfleet.training.metrics import (
    CLASS_METRIC_NAMES,
    check_metric_names,
    higher_is_better,
)
from adapterfleet.training.optim import build_optimizer, build_scheduler
from adapterfleet.training.runtime import (
    Batch,
    TrainBatches,
    autocast,
    autocast_dtype,
    batch_size_of,
    checked_params,
    count_batches,
    epoch_source,
    logits_of,
    progress,
    require_reiterable,
    resolve_device,
    rows_in,
    to_device,
)
from adapterfleet.training.state import LoopState, RngState, seed_everything

LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
# A mean train loss this many times the first batch's (at least 1) is a diverged run: a fusion at
# learning_rate 1e12 stayed finite (4e27), was registered, and its ties took @best.
DIVERGED_FACTOR = 1e6


class TrainingDiverged(JobFailed, ArithmeticError):
    """The train loss of an epoch is NaN, infinite or blown up: nothing after it can learn."""


def fit(
    model: torch.nn.Module,
    trainable_params: Iterable[torch.nn.Parameter],
    train_batches: TrainBatches,
    dev_batches: Iterable[Batch],
    config: TrainConfig,
    *,
    loss_fn: LossFn | None = None,
    extra_loss: Callable[[], torch.Tensor] | None = None,
    callbacks: Sequence[Callback] = (),
    resume_from: str | Path | None = None,
    metric_names: Sequence[str] | None = None,
    device: torch.device | None = None,
) -> FitResult:
    """Train `trainable_params` of `model` with AdamW; return when epochs or patience run out
    (patience only from `config.min_epochs` on).

    `model(batch)` returns logits (B, num_labels); `batch["labels"]` holds the targets (class
    indices, or float numbers for regression: then the model gives one output per example).
    `train_batches` is a callable `epoch -> batches` (epoch is 1-based) or a re-iterable of
    batches; `dev_batches` is a re-iterable. `loss_fn(logits, labels)` defaults to cross-entropy
    (mean squared error for float labels);
    `extra_loss()` is added to every training step's loss. Dev metrics are `metric_names`
    (default: `config.metric`, and accuracy for a classification metric). The model ends on the
    best epoch's trainable state, in eval mode; the best epoch is the highest `config.metric`
    (the lowest for a lower-is-better one such as mse). `resume_from` is a directory written by
    `EpochReport.save_checkpoint`. `device` overrides `config.device` (a Ray Train worker
    passes the one Ray gave it).

    Inside an initialised `torch.distributed` group the same loop trains data-parallel
    (`training/distributed.py`): each rank its rows of every batch, gradients summed.
    """
    params = checked_params(model, trainable_params)
    epoch_batches = epoch_source(train_batches)
    require_reiterable(dev_batches, "dev_batches")
    default = ["accuracy"] if config.metric in CLASS_METRIC_NAMES else []
    names = list(dict.fromkeys([config.metric, *(metric_names or default)]))
    check_metric_names(names)
    device = device or resolve_device(config.device)
    dtype = autocast_dtype(config.precision, device)
    group = DataParallel.current()
    seed_everything(config.seed)
    model.to(device)
    optimizer = build_optimizer(params, config.learning_rate, config.weight_decay)
    total_steps = math.ceil(count_batches(epoch_batches) / config.grad_accum_steps)
    scheduler = build_scheduler(optimizer, total_steps * config.max_epochs, config.warmup_ratio)
    parts = TrainingParts(params, optimizer, scheduler, config)
    run = _FitRun(
        model, parts, epoch_batches, dev_batches, names, device, dtype, group,
        loss_fn=loss_fn or default_loss, extra_loss=extra_loss, callbacks=callbacks,
    )  # fmt: skip
    if resume_from is not None:
        run.state, run.best = load_checkpoint(Path(resume_from), parts)
    group.broadcast_(params)  # every rank starts from rank 0's weights, as DDP does
    return run.run()


@dataclass
class _FitRun:
    """The live objects and progress of one `fit` call; each method is one step of the loop."""

    model: torch.nn.Module
    parts: TrainingParts
    epoch_batches: Callable[[int], Iterable[Batch]]
    dev_batches: Iterable[Batch]
    metric_names: list[str]
    device: torch.device
    dtype: torch.dtype | None  # autocast to it; None: float32
    group: DataParallel
    loss_fn: LossFn
    extra_loss: Callable[[], torch.Tensor] | None
    callbacks: Sequence[Callback]
    state: LoopState = field(default_factory=LoopState)
    best: list[torch.Tensor] | None = None
    saving_epoch: int | None = None  # the epoch whose callbacks are running
    scaler: torch.amp.GradScaler | None = None  # fp16 only: the loss scale
    graphs: StepGraphs | None = None  # cuda_graphs true, or auto on a GPU: steps as CUDA graphs

    def __post_init__(self) -> None:
        if self.dtype == torch.float16:
            self.scaler = torch.amp.GradScaler(self.device.type)
        unable = why_not_graphed(self.device, self.dtype, self.group)
        if self.config.cuda_graphs is True and unable:
            raise ValueError(f"TrainConfig.cuda_graphs: {unable}")
        if self.config.cuda_graphs is not False and not unable:  # true, or auto
            self.graphs = StepGraphs(self._step_on_device, self.parts.params)

    @property
    def config(self) -> TrainConfig:
        return self.parts.config

    def run(self) -> FitResult:
        reason = self._stop_reason(requested=False)
        if reason is None:
            for callback in self.callbacks:
                callback.on_train_start()
        while reason is None:
            requested = self._run_epoch(self.state.epoch + 1)
            reason = self._stop_reason(requested)
        result = self._finish(reason)
        for callback in self.callbacks:
            callback.on_fit_end(result)
        return result

    def _stop_reason(self, requested: bool) -> str | None:
        state, patience = self.state, self.config.patience
        if state.epoch >= self.config.max_epochs:
            return "max_epochs"
        if requested:
            return "callback"
        if state.epoch < self.config.min_epochs:
            return None
        if patience is not None and state.epochs_without_improvement >= patience:
            return "early_stopping"
        return None

    def _run_epoch(self, epoch: int) -> bool:
        start = time.perf_counter()
        replays = self.graphs.replays if self.graphs is not None else 0
        train_loss, examples = self._train_epoch(epoch)
        first = self.state.first_loss
        blown = first is not None and train_loss > DIVERGED_FACTOR * max(first, 1.0)
        if not math.isfinite(train_loss) or blown:
            scale = f", over {DIVERGED_FACTOR:.0e} times the first batch's ({first:.4g})"
            raise TrainingDiverged(
                f"epoch {epoch}: the mean train loss is {train_loss:.4g}{scale if blown else ''}: "
                f"training diverged; lower learning_rate (now {self.config.learning_rate:g}), "
                "check the labels (a regression task: declare their range, which scales them), "
                "or train in fp32"
            )
        replays = self.graphs.replays - replays if self.graphs is not None else None
        throughput = examples / max(time.perf_counter() - start, 1e-9)
        dev = evaluate(
            self.model, self.dev_batches, self.metric_names,
            device=self.device, dtype=self.dtype, data_parallel=self.group,
        )  # fmt: skip
        seconds = time.perf_counter() - start
        self._record_epoch(epoch, train_loss, dev, examples, seconds, replays)
        rng = RngState.capture()
        report = self._report(seconds, throughput, saver=lambda d: self._save(d, epoch, rng))
        self.saving_epoch = epoch
        requested = [callback.on_epoch_end(report) is True for callback in self.callbacks]
        self.saving_epoch = None
        rng.restore()  # callbacks that draw random numbers must not change training
        return any(requested)

    def _train_epoch(self, epoch: int) -> tuple[float, int]:
        self.model.train()
        self.parts.optimizer.zero_grad(set_to_none=self.graphs is None)
        loss_sum, batches, examples, pending = torch.zeros((), device=self.device), 0, 0, 0
        show = self.config.progress and sys.stderr.isatty()
        source = self.epoch_batches(epoch)
        clock = self._progress_clock(epoch, source, bar=show)
        for batch in progress(source, f"epoch {epoch}", show):
            rows, share = self.group.shard(batch)
            if share > 0:  # a short last batch may leave a rank no rows
                loss_sum += self._forward_backward(rows, share)
            batches, examples, pending = batches + 1, examples + batch_size_of(batch), pending + 1
            if self.state.first_loss is None:  # every rank takes part in the sum
                self.state.first_loss = self.group.sum(loss_sum.detach().clone()).item()
            clock.tick(examples, batches)
            if pending == self.config.grad_accum_steps:
                self._optimizer_step(pending)
                pending = 0
        if pending:
            self._optimizer_step(pending)
        if batches == 0:
            raise ValueError(f"train_batches yielded no batches in epoch {epoch}")
        return self.group.sum(loss_sum).item() / batches, examples

    def _progress_clock(self, epoch: int, batches: Iterable[Batch], bar: bool) -> ProgressClock:
        """Rank 0's clock of `on_progress` calls; one that never calls under a progress bar or
        where no callback listens."""
        listening = self.group.is_main and not bar and self.callbacks
        every_s = progress_interval() if listening else math.inf
        count = len(batches) if hasattr(batches, "__len__") else None
        return ProgressClock(epoch, rows_in(batches), count, every_s, self.callbacks)

    def _forward_backward(self, batch: Batch, share: float) -> torch.Tensor:
        """The loss of this rank's rows, weighted by their share of the global batch (the
        shares of all ranks add up to the global batch's mean)."""
        batch = to_device(batch, self.device)
        if self.graphs is not None:  # never data-parallel (why_not_graphed): share is 1
            return self.graphs(batch)
        return self._step_on_device(batch, share)

    def _step_on_device(self, batch: dict, share: float = 1.0) -> torch.Tensor:
        with autocast(self.device, self.dtype, cache=self.graphs is None):
            loss = self.loss_fn(logits_of(self.model(batch)), batch["labels"])
        if self.extra_loss is not None:
            loss = loss + self.extra_loss()
        if self.group.active:
            loss = loss * share
        (self.scaler.scale(loss) if self.scaler is not None else loss).backward()
        return loss.detach().float()

    def _optimizer_step(self, micro_batches: int) -> None:
        """Sum the gradients over the ranks, average them over `micro_batches`, clip, step,
        advance the LR."""
        params, optimizer = self.parts.params, self.parts.optimizer
        self.group.sum_gradients_(params)
        if self.scaler is not None:
            self.scaler.unscale_(optimizer)
        if micro_batches > 1:
            for param in params:
                if param.grad is not None:
                    param.grad.div_(micro_batches)
        if self.config.max_grad_norm is not None:
            torch.nn.utils.clip_grad_norm_(params, self.config.max_grad_norm)
        if self.scaler is not None:  # skips the step when the scaled gradients overflowed
            self.scaler.step(optimizer)
            self.scaler.update()
        else:
            optimizer.step()
        self.parts.scheduler.step()
        optimizer.zero_grad(set_to_none=self.graphs is None)  # a graph adds into its gradients
        self.state.global_step += 1

    def _record_epoch(
        self, epoch: int, loss: float, dev: dict, examples: int, seconds: float, replays: int | None
    ):
        state = self.state
        state.epoch = epoch
        metric = self.config.metric
        if state.record(dev[metric], higher_is_better(metric)):
            self.best = [p.detach().clone() for p in self.parts.params]
        lr = self.parts.optimizer.param_groups[0]["lr"]
        dev_flat = {f"dev_{k}": v for k, v in dev.items()}
        graphs = {} if replays is None else {"cuda_graph_replays": replays}
        entry = {"epoch": epoch, "train_loss": loss, "learning_rate": lr, **dev_flat, **graphs}
        state.history.append(entry)
        state.examples_seen += examples
        state.train_seconds += seconds

    def _report(
        self, seconds: float, throughput: float, saver: Callable[[Path], Path]
    ) -> EpochReport:
        state, last = self.state, self.state.history[-1]
        return EpochReport(
            epoch=state.epoch,
            global_step=state.global_step,
            train_loss=last["train_loss"],
            learning_rate=last["learning_rate"],
            dev_metrics={k[4:]: v for k, v in last.items() if k.startswith("dev_")},
            metric=self.config.metric,
            best_metric=state.best_metric,
            best_epoch=state.best_epoch,
            is_best=state.best_epoch == state.epoch,
            epoch_seconds=seconds,
            elapsed_seconds=state.train_seconds,
            examples_per_second=throughput,
            _saver=saver,
            cuda_graph_replays=last.get("cuda_graph_replays"),
            cuda_graphs_fallback=self.graphs.disabled if self.graphs is not None else None,
        )

    def _save(self, directory: Path, epoch: int, rng: RngState) -> Path:
        if self.saving_epoch != epoch:
            raise RuntimeError("save_checkpoint must be called during on_epoch_end of its epoch")
        return save_checkpoint(directory, self.parts, self.state, self.best, rng)

    def _finish(self, reason: str) -> FitResult:
        with torch.no_grad():
            for param, value in zip(self.parts.params, self.best, strict=True):
                param.copy_(value)
        self.model.eval()
        state = self.state
        best_entry = state.history[state.best_epoch - 1]
        return FitResult(
            best_metric=state.best_metric,
            best_epoch=state.best_epoch,
            best_metrics={k[4:]: v for k, v in best_entry.items() if k.startswith("dev_")},
            epochs_run=state.epoch,
            history=[dict(h) for h in state.history],
            stopped_early=reason != "max_epochs",
            stop_reason=reason,
            train_seconds=state.train_seconds,
            examples_per_second=state.examples_seen / max(state.train_seconds, 1e-9),
        )


def why_not_graphed(
    device: torch.device, dtype: torch.dtype | None, group: DataParallel
) -> str | None:
    """Why steps cannot be CUDA graphs here, or None: they need one CUDA device, no fp16 loss
    scaling and no data-parallel ranks (`cuda_graphs: auto` then trains eagerly)."""
    if device.type != "cuda":
        return f"training runs on {device.type}; set device: cuda (or cuda_graphs: false)"
    if dtype == torch.float16:
        return (
            "precision resolved to fp16, whose loss scaling a graph cannot hold; "
            "set precision: bf16 or fp32"
        )
    if group.active:
        return "the trial trains on several workers; set resources.workers: 1"
    return None


def default_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Cross-entropy of class logits; mean squared error of one output per example against
    float labels (regression)."""
    if labels.is_floating_point():
        return torch.nn.functional.mse_loss(logits.reshape(labels.shape).float(), labels.float())
    return torch.nn.functional.cross_entropy(logits, labels)
