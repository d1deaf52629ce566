"""Dev metrics: of class predictions (classification, multiple choice) or of numbers (regression).

Classification: `accuracy`; `f1` (binary F1 of class 1 on two classes, as GLUE reports for MRPC and
QQP; on more classes it is macro-F1, and the pipeline records it under the name `f1_macro`);
`f1_macro` (mean F1 over the classes present); `f1_micro` (F1 of all decisions pooled: equal to
accuracy for one label per example); `matthews` (Matthews correlation, its multi-class form).
Regression: `pearson`, `spearman` (Pearson of the ranks, ties averaged) and `mse`.

Which metrics fit which task type, each type's default, and the direction (`mse` is lower-is-
better, every other one higher-is-better) are plain data here, read by the config's checks.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

Labels = Any  # a tensor or a sequence of numbers; torch is imported where metrics are computed

CLASS_METRIC_NAMES = ("accuracy", "f1", "f1_macro", "f1_micro", "matthews")
VALUE_METRIC_NAMES = ("pearson", "spearman", "mse")
# The metrics that fit each task type, its default (first), and what its dev set reports.
METRICS_BY_KIND = {
    "classification": CLASS_METRIC_NAMES,
    "multiple_choice": ("accuracy",),
    "regression": VALUE_METRIC_NAMES,
}
DEFAULT_METRIC = {kind: names[0] for kind, names in METRICS_BY_KIND.items()}
DEFAULT_REPORTED = {"classification": ("accuracy",), "multiple_choice": ("accuracy",)}
DEFAULT_REPORTED["regression"] = VALUE_METRIC_NAMES
LOWER_IS_BETTER = frozenset({"mse"})


def higher_is_better(name: str) -> bool:
    """Whether a larger value of metric `name` is a better model (False for `mse`)."""
    return name not in LOWER_IS_BETTER


def metric_direction(name: str) -> str:
    """Tune's mode for metric `name`: `max`, or `min` for a lower-is-better one."""
    return "max" if higher_is_better(name) else "min"


def signed(name: str, value: float) -> float:
    """`value` made higher-is-better: negated for a lower-is-better metric."""
    return value if higher_is_better(name) else -value


def _as_pair(preds: Labels, labels: Labels, numbers: bool = False) -> tuple[Any, Any]:
    import torch

    dtype = torch.float64 if numbers else torch.long
    p = torch.as_tensor(preds).detach().reshape(-1).cpu().to(dtype)
    y = torch.as_tensor(labels).detach().reshape(-1).cpu().to(dtype)
    if p.shape != y.shape:
        raise ValueError(f"preds and labels differ in length: {p.numel()} vs {y.numel()}")
    if p.numel() == 0:
        raise ValueError("cannot compute metrics on zero examples")
    return p, y


def accuracy(preds: Labels, labels: Labels) -> float:
    """Fraction of predictions equal to the labels."""
    p, y = _as_pair(preds, labels)
    return (p == y).double().mean().item()


def _f1_of(p: torch.Tensor, y: torch.Tensor, cls: int) -> float:
    """F1 of class `cls`; 0.0 when it has no true positive."""
    tp = ((p == cls) & (y == cls)).sum().item()
    fp = ((p == cls) & (y != cls)).sum().item()
    fn = ((p != cls) & (y == cls)).sum().item()
    return 0.0 if tp == 0 else 2 * tp / (2 * tp + fp + fn)


def f1(preds: Labels, labels: Labels) -> float:
    """Binary F1 of the positive class 1 (as GLUE reports for MRPC and QQP); macro-F1 when the
    predictions or labels hold a class above 1 (more than two classes).

    Defined as 0.0 when there are no true positives (including when neither side has a 1).
    """
    p, y = _as_pair(preds, labels)
    if max(p.max().item(), y.max().item()) > 1:
        return f1_macro(p, y)
    return _f1_of(p, y, 1)


def f1_macro(preds: Labels, labels: Labels) -> float:
    """The mean of the per-class F1 over the classes present in the labels or predictions."""
    p, y = _as_pair(preds, labels)
    classes = sorted(set(p.tolist()) | set(y.tolist()))
    return sum(_f1_of(p, y, c) for c in classes) / len(classes)


def f1_micro(preds: Labels, labels: Labels) -> float:
    """F1 of every (example, class) decision pooled; with one label per example it equals
    accuracy (each wrong prediction is one false positive and one false negative)."""
    p, y = _as_pair(preds, labels)
    tp = (p == y).sum().item()
    wrong = p.numel() - tp
    return 0.0 if tp == 0 else 2 * tp / (2 * tp + 2 * wrong)


def matthews(preds: Labels, labels: Labels) -> float:
    """Matthews correlation coefficient (Gorodkin's multi-class form; the usual binary MCC on
    two classes); 0.0 when a side has a single class (the formula's denominator is zero)."""
    import torch

    p, y = _as_pair(preds, labels)
    k = int(max(p.max().item(), y.max().item())) + 1
    confusion = torch.zeros(k, k, dtype=torch.float64)
    confusion.index_put_((y, p), torch.ones_like(p, dtype=torch.float64), accumulate=True)
    true_sums, pred_sums = confusion.sum(1), confusion.sum(0)
    n, correct = confusion.sum(), confusion.trace()
    numerator = correct * n - (pred_sums * true_sums).sum()
    denominator = ((n**2 - (pred_sums**2).sum()) * (n**2 - (true_sums**2).sum())).sqrt()
    return 0.0 if denominator.item() == 0 else (numerator / denominator).item()


def _correlation(a: torch.Tensor, b: torch.Tensor) -> float:
    """Pearson's r; 0.0 when a side is constant (no linear relation can be measured)."""
    a, b = a - a.mean(), b - b.mean()
    denominator = (a.pow(2).sum() * b.pow(2).sum()).sqrt()
    return 0.0 if denominator.item() == 0 else (a * b).sum().div(denominator).item()


def _ranks(values: torch.Tensor) -> torch.Tensor:
    """1-based ranks, tied values sharing the mean of their ranks."""
    import torch

    _, inverse, counts = torch.unique(values, return_inverse=True, return_counts=True)
    ends = counts.cumsum(0).double()  # the last rank of each distinct value, in sorted order
    return (ends - (counts.double() - 1) / 2)[inverse]


def pearson(preds: Labels, labels: Labels) -> float:
    """Pearson correlation of the predicted numbers with the labels (0.0 for a constant side)."""
    p, y = _as_pair(preds, labels, numbers=True)
    return _correlation(p, y)


def spearman(preds: Labels, labels: Labels) -> float:
    """Spearman rank correlation: Pearson of the ranks, ties given their mean rank."""
    p, y = _as_pair(preds, labels, numbers=True)
    return _correlation(_ranks(p), _ranks(y))


def mse(preds: Labels, labels: Labels) -> float:
    """Mean squared error, in the labels' own units (lower is better)."""
    p, y = _as_pair(preds, labels, numbers=True)
    return (p - y).pow(2).mean().item()


METRICS: dict[str, Callable[[Labels, Labels], float]] = {
    "accuracy": accuracy,
    "f1": f1,
    "f1_macro": f1_macro,
    "f1_micro": f1_micro,
    "matthews": matthews,
    "pearson": pearson,
    "spearman": spearman,
    "mse": mse,
}


def check_metric_names(names: Sequence[str]) -> None:
    """Raise a one-line error naming any unknown metric and the known ones."""
    unknown = [name for name in names if name not in METRICS]
    if unknown:
        raise ValueError(f"unknown metric(s) {unknown}; known metrics: {sorted(METRICS)}")


def compute_metrics(preds: Labels, labels: Labels, names: Sequence[str]) -> dict[str, float]:
    """The named metrics of `preds` against `labels`, e.g. `{"accuracy": 0.9, "f1": 0.88}`.

    Floating-point predictions are numbers (regression): only the regression metrics apply."""
    import torch

    check_metric_names(names)
    numbers = torch.as_tensor(preds).is_floating_point()
    wrong = [n for n in names if (n in VALUE_METRIC_NAMES) != bool(numbers)]
    if wrong:
        kind = "regression" if numbers else "classification"
        fits = ", ".join(METRICS_BY_KIND[kind])
        raise ValueError(f"metric(s) {wrong} do not fit {kind} predictions; use {fits}")
    p, y = _as_pair(preds, labels, numbers=bool(numbers))
    return {name: METRICS[name](p, y) for name in names}
