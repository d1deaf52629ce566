"""What a model that learned nothing scores on a dev split: the baseline a registered adapter
or fusion is held against.

A head that learned nothing useful gives every input the majority class, and its accuracy is
then that class's share of the split: 0.95 looks good on a split of 95 % `neg`. Its Matthews
correlation is 0. A regression head that learned nothing answers about the mean of what it was
trained on: its MSE is then near the split's variance, and a constant has no correlation with
anything (Pearson and Spearman 0). `adapterfleet tasks` shows each task's baseline, and a
registered adapter or fusion whose dev score is no better says so at the end of its line.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from adapterfleet.data.cache import TokenizedTask

_SLACK = 1e-9  # a score equal to the baseline's, up to float noise, is no better


def _at_chance(metric: str, value: float) -> str:
    """The note for a correlation at or below 0 (what a constant answer scores), else ""."""
    if metric in ("matthews", "pearson", "spearman") and value <= _SLACK:
        return f"; no better than a constant answer ({metric} 0)"
    return ""


@dataclass(frozen=True)
class Majority:
    """The most common label of a split (the first in `label_names` order on a tie) and its
    share of the split's rows."""

    label: str
    share: float

    def __str__(self) -> str:
        return f"{self.label} ({self.share:.0%})"

    def note(self, metric: str, value: float) -> str:
        """`; no better than always answering 'neg' (0.9500 of dev)` for an accuracy at or below
        the share, the constant answer's note for a Matthews correlation at or below 0 (F1 has
        no such baseline: nothing said), else ""."""
        if metric == "accuracy" and value <= self.share + _SLACK:
            return f"; no better than always answering {self.label!r} ({self.share:.4f} of dev)"
        return _at_chance(metric, value)


@dataclass(frozen=True)
class DevMean:
    """A regression split's mean and (population) variance: the MSE of always answering it."""

    mean: float
    variance: float

    def __str__(self) -> str:
        return f"mean {self.mean:.4g} (MSE {self.variance:.4g})"

    def note(self, metric: str, value: float) -> str:
        """`; no better than always answering the dev mean 2.71 (MSE 2.4900)` for an MSE at or
        above the variance, the constant answer's note for a correlation at or below 0, else
        ""."""
        if metric == "mse" and value >= self.variance - _SLACK:
            return (
                f"; no better than always answering the dev mean {self.mean:.4g} "
                f"(MSE {self.variance:.4f})"
            )
        return _at_chance(metric, value)


def majority(labels: Sequence[int], label_names: Sequence[str]) -> Majority | None:
    """The majority class of `labels` (class indices into `label_names`); None for a split
    without rows or without label names (a regression task)."""
    if not labels or not label_names:
        return None
    counts = Counter(int(label) for label in labels)
    index = max(range(len(label_names)), key=lambda i: (counts.get(i, 0), -i))
    return Majority(str(label_names[index]), counts.get(index, 0) / len(labels))


def dev_mean(values: Sequence[float]) -> DevMean | None:
    """The mean and variance of a regression split's labels; None for a split without rows."""
    if not values:
        return None
    numbers = [float(value) for value in values]
    return DevMean(statistics.fmean(numbers), statistics.pvariance(numbers))


Chance = Majority | DevMean


def dev_chance(tokenized: TokenizedTask) -> Chance | None:
    """What a model that learned nothing scores on a tokenised task's dev split."""
    if tokenized.is_regression:
        return dev_mean(tokenized.dev.labels)
    return majority(tokenized.dev.labels, tokenized.label_names)
