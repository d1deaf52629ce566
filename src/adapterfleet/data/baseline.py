"""The majority class of a dev split: what a model that always gives one label scores.

A head that learned nothing useful gives every input the majority class, and its accuracy is
then that class's share of the split: 0.95 looks good on a split of 95 % `neg`. `adapterfleet
tasks` shows the share beside each task, and a registered adapter or fusion whose dev accuracy
is not above it says so in its line.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from adapterfleet.data.cache import TokenizedTask


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
        the share (other metrics have other baselines: nothing said), else ""."""
        if metric != "accuracy" or value > self.share + 1e-9:
            return ""
        return f"; no better than always answering {self.label!r} ({self.share:.4f} of dev)"


def majority(labels: Sequence[int], label_names: Sequence[str]) -> Majority | None:
    """The majority class of `labels` (class indices into `label_names`); None for a split
    without rows or without label names (a regression task)."""
    if not labels or not label_names:
        return None
    counts = Counter(int(label) for label in labels)
    index = max(range(len(label_names)), key=lambda i: (counts.get(i, 0), -i))
    return Majority(str(label_names[index]), counts.get(index, 0) / len(labels))


def dev_majority(tokenized: TokenizedTask) -> Majority | None:
    """The majority class of a tokenised task's dev split; None for regression."""
    if tokenized.is_regression:
        return None
    return majority(tokenized.dev.labels, tokenized.label_names)
