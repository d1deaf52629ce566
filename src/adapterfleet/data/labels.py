"""A classification label cell -> its label index (`LabelMap`), one reading per column."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from adapterfleet.data.errors import TaskError
from adapterfleet.data.quality import is_blank

if TYPE_CHECKING:
    from adapterfleet.data.tasks import TaskSpec

_INT = re.compile(r"^[+-]?\d{1,18}$")  # more digits: no index, and `int` may refuse them


class LabelMap:
    """Label value -> index: a value equal to a label name first, else an integer index.

    A column is read one way: one whose values mix names and indices where the two readings
    disagree (label_names [1, 2, 3] over a file of 0, 1, 2: is 1 the first label or the
    second?) is refused, not mapped half by name and half by index."""

    def __init__(self, spec: TaskSpec) -> None:
        self.spec = spec
        self.by_name = {name: i for i, name in enumerate(spec.label_names)}
        for i, name in enumerate(spec.label_names):  # JSON's true/false find True/False
            if name.lower() in ("true", "false"):
                self.by_name.setdefault(name.lower(), i)

    def check_column(self, values: Iterable[Any], split: str, source: str) -> None:
        texts = {_label_text(v) for v in values if not is_blank(v)}
        as_index = sorted(
            int(t)
            for t in texts
            if isinstance(t, str) and t not in self.by_name and _is_index(t, self.spec)
        )
        clash = sorted(
            t for t in texts if t in self.by_name and _INT.match(t) and int(t) != self.by_name[t]
        )
        if as_index and clash:
            names = list(self.spec.label_names)
            first = clash[0]
            problem = (
                f"{source} mixes label names ({', '.join(clash)}) with indices "
                f"({', '.join(map(str, as_index))}) and the two readings disagree: {first} is "
                f"label {self.by_name[first]} by name, label {first} by index"
            )
            fix = (
                f"give label_names as the values the file holds, in label order, e.g. "
                f"{[str(i) for i in range(len(names))]}"
            )
            raise TaskError(self.spec.name, f"{split} {self.spec.label_field!r}", problem, fix)

    def index(self, value: Any, split: str, number: int, source: str) -> int:
        text = _label_text(value)
        if isinstance(text, str):
            if text in self.by_name:
                return self.by_name[text]
            if _is_index(text, self.spec):
                return int(text)
        names = list(self.spec.label_names)
        raise TaskError(
            self.spec.name,
            f"{split} {self.spec.label_field!r}",
            f"unknown label value {value!r} (record {number} of {source})",
            f"label_names are {names} (or indices 0..{len(names) - 1}); fix label_names",
        )


def _label_text(value: Any) -> Any:
    """A label cell as text where it is one: a string stripped, a whole number written as an
    integer, a bool as `true`/`false` (JSON's spelling); anything else as it is."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, int):
        return str(value)
    return value.strip() if isinstance(value, str) else value


def _is_index(text: str, spec: TaskSpec) -> bool:
    return bool(_INT.match(text)) and 0 <= int(text) < spec.num_labels
