"""Dev-set evaluation: predictions by argmax over the logits (or the one output of a regression
head, for float labels), then metrics."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import torch

from adapterfleet.training.distributed import DataParallel
from adapterfleet.training.metrics import check_metric_names, compute_metrics
from adapterfleet.training.runtime import Batch, autocast, logits_of, to_device


@torch.no_grad()
def evaluate(
    model: torch.nn.Module,
    dev_batches: Iterable[Batch],
    metric_names: Sequence[str],
    *,
    device: torch.device | None = None,
    bf16: bool = False,
    dtype: torch.dtype | None = None,
    data_parallel: DataParallel | None = None,
) -> dict[str, float]:
    """Metrics of `model` on `dev_batches`, without gradients and in eval mode.

    The model's train/eval mode is restored afterwards. `device` defaults to the device of the
    model's first parameter (CPU for a model without parameters). Autocast to `dtype` (or
    bfloat16 with `bf16`). With `data_parallel` over several processes each evaluates its rows
    of every batch and the predictions are gathered: every rank returns the same metrics.
    """
    check_metric_names(metric_names)
    device = device or _model_device(model)
    was_training = model.training
    model.eval()
    group = data_parallel or DataParallel()
    dtype = dtype or (torch.bfloat16 if bf16 else None)
    preds, labels = [], []
    try:
        for global_batch in dev_batches:
            batch, share = group.shard(global_batch)
            if share == 0:
                continue
            batch = to_device(batch, device)
            with autocast(device, dtype):
                logits = logits_of(model(batch))
            targets = batch["labels"]
            if targets.is_floating_point():  # regression: the head's number is the prediction
                preds.append(logits.float().reshape(targets.shape).cpu())
            else:
                preds.append(logits.argmax(dim=-1).cpu())
            labels.append(targets.cpu())
    finally:
        model.train(was_training)
    preds, labels = group.gather(preds), group.gather(labels)
    if not preds:
        raise ValueError("dev_batches is empty: nothing to evaluate")
    return compute_metrics(torch.cat(preds), torch.cat(labels), metric_names)


def _model_device(model: torch.nn.Module) -> torch.device:
    first = next(model.parameters(), None)
    return first.device if first is not None else torch.device("cpu")
