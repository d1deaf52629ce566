"""Classification metrics on predicted and true labels (tensors or lists of ints)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

Labels = Any  # a tensor or a sequence of ints; torch is imported where metrics are computed


def _as_pair(preds: Labels, labels: Labels) -> tuple[torch.Tensor, torch.Tensor]:
    import torch

    p = torch.as_tensor(preds).detach().reshape(-1).cpu().long()
    y = torch.as_tensor(labels).detach().reshape(-1).cpu().long()
    if p.shape != y.shape:
        raise ValueError(f"preds and labels differ in length: {p.numel()} vs {y.numel()}")
    if p.numel() == 0:
        raise ValueError("cannot compute metrics on zero examples")
    return p, y


def accuracy(preds: Labels, labels: Labels) -> float:
    """Fraction of predictions equal to the labels."""
    p, y = _as_pair(preds, labels)
    return (p == y).double().mean().item()


def f1(preds: Labels, labels: Labels) -> float:
    """Binary F1 of the positive class 1 (as GLUE reports for MRPC and QQP).

    Defined as 0.0 when there are no true positives (including when neither side has a 1).
    """
    p, y = _as_pair(preds, labels)
    tp = ((p == 1) & (y == 1)).sum().item()
    fp = ((p == 1) & (y != 1)).sum().item()
    fn = ((p != 1) & (y == 1)).sum().item()
    if tp == 0:
        return 0.0
    return 2 * tp / (2 * tp + fp + fn)


METRICS: dict[str, Callable[[Labels, Labels], float]] = {"accuracy": accuracy, "f1": f1}


def check_metric_names(names: Sequence[str]) -> None:
    """Raise a one-line error naming any unknown metric and the known ones."""
    unknown = [name for name in names if name not in METRICS]
    if unknown:
        raise ValueError(f"unknown metric(s) {unknown}; known metrics: {sorted(METRICS)}")


def compute_metrics(preds: Labels, labels: Labels, names: Sequence[str]) -> dict[str, float]:
    """The named metrics of `preds` against `labels`, e.g. `{"accuracy": 0.9, "f1": 0.88}`."""
    check_metric_names(names)
    p, y = _as_pair(preds, labels)
    return {name: METRICS[name](p, y) for name in names}
