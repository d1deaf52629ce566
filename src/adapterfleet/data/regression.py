"""Regression tasks (`type: regression`): the declared `range` and the number each label holds.

A regression task's label column holds a real number (STS-B: a similarity score in [0, 5]).
`range: [low, high]` is optional; when given, every label must lie in it, and the task head learns
on that range mapped to [0, 1] (see `adapters.heads.HeadConfig.value_range`): its outputs, the dev
metrics and the predictions stay in the labels' own units.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from adapterfleet.data.errors import TaskError
from adapterfleet.data.numbers import as_number

if TYPE_CHECKING:
    import datasets

    from adapterfleet.data.tasks import TaskSpec

RANGE_KEY = "range"


def parse_range(task: str, raw: Any) -> tuple[float, float]:
    """The `range:` of a regression task: two finite, increasing numbers."""
    numbers = [as_number(v) for v in raw] if isinstance(raw, list | tuple) else []
    low, high = numbers if len(numbers) == 2 else (None, None)
    if isinstance(raw, str) or low is None or high is None or not low < high:
        raise TaskError(
            task,
            RANGE_KEY,
            f"expected two increasing numbers [low, high], got {raw!r}",
            "e.g. range: [0, 5], or leave it out",
        )
    return low, high


class NumberLabel:
    """Reads a regression label: the number in the label column, inside the task's range."""

    def __init__(self, spec: TaskSpec) -> None:
        self.spec = spec

    def index(self, value: Any, split: str, number: int, source: str) -> float:
        """The label of record `number` as a float (`index` mirrors the class labels' reader)."""
        spec = self.spec
        label = as_number(value)
        where = f"{split} {spec.label_field!r}"
        if label is None:
            shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
            raise TaskError(
                spec.name,
                where,
                f"{shown} is not a number (record {number} of {source})",
                "a regression label is a number; fix the row or label_field",
            )
        if spec.value_range is not None:
            low, high = spec.value_range
            if not low <= label <= high:
                raise TaskError(
                    spec.name,
                    where,
                    f"{label:g} is outside range [{low:g}, {high:g}] (record {number} of {source})",
                    "widen range or fix the row",
                )
        return label


def label_feature(spec: TaskSpec) -> datasets.Value | datasets.ClassLabel:
    """The `label` column's type: a float64 number for regression, else the class names."""
    import datasets

    if spec.is_regression:
        return datasets.Value("float64")
    return datasets.ClassLabel(names=list(spec.label_names))
