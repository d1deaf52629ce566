"""A classification label cell -> its label index (`LabelMap`), one reading per column."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from adapterfleet.console import plural
from adapterfleet.data.errors import TaskError
from adapterfleet.data.quality import is_blank

if TYPE_CHECKING:
    from adapterfleet.data.tasks import TaskSpec

_INT = re.compile(r"^[+-]?\d{1,18}$")  # more digits: no index, and `int` may refuse them
_WHOLE_FLOAT = re.compile(r"^[+-]?\d{1,18}\.0+$")  # 1.0: pandas' CSV of a float column


class LabelMap:
    """Label value -> index: a value equal to a label name first, else an integer index.

    A column is read one way: one whose values mix names and indices where the two readings
    disagree (label_names [1, 2, 3] over a file of 0, 1, 2: is 1 the first label or the
    second?) is refused, not mapped half by name and half by index; so is one that mixes text
    names with integers (neg, pos and a stray 1), which read as indices would become labels
    without a word. A column of integers alone is index-coded (GLUE's 0/1 with names)."""

    def __init__(self, spec: TaskSpec) -> None:
        self.spec = spec
        self.by_name = {name: i for i, name in enumerate(spec.label_names)}
        for i, name in enumerate(spec.label_names):  # JSON's true/false find True/False
            if name.lower() in ("true", "false"):
                self.by_name.setdefault(name.lower(), i)

    def text(self, value: Any) -> Any:
        """`_label_text`, and a whole number written as a float ("1.0", as pandas writes a
        float column to CSV) read as the float 1.0 is, as "1", unless it is a label name: a
        CSV and a Parquet file of the same column read alike, by name or as indices."""
        text = _label_text(value)
        if isinstance(text, str) and text not in self.by_name and _WHOLE_FLOAT.match(text):
            return str(int(text.partition(".")[0]))
        return text

    def check_column(
        self, cells: Iterable[tuple[int, Any]], split: str, source: str
    ) -> LabelForm | None:
        """Refuse a column of (record number, label cell) that mixes two readings; how the
        column writes its labels, for `check_same_form` (None: it says nothing either way)."""
        records: dict[str, list[int]] = {}  # what is not text is refused by `index`
        for number, value in cells:
            text = self.text(value)
            if isinstance(text, str) and not is_blank(value):
                records.setdefault(text, []).append(number)
        texts = set(records)
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
        self._refuse_names_with_integers(records, split, source)
        named = sorted(t for t in records if t in self.by_name and not _INT.match(t))
        if named:
            return LabelForm(split, source, "names", tuple(named))
        indices = sorted(
            (t for t in records if t not in self.by_name and _is_index(t, self.spec)), key=int
        )
        return LabelForm(split, source, "indices", tuple(indices)) if indices else None

    def _refuse_names_with_integers(
        self, records: dict[str, list[int]], split: str, source: str
    ) -> None:
        """Text names beside bare integers (neg, pos and a stray 1): refused with both kinds
        and the integers' first records, not read half by name and half by index."""
        named = sorted(t for t in records if t in self.by_name and not _INT.match(t))
        integers = sorted(
            (t for t in records if t not in self.by_name and _is_index(t, self.spec)), key=int
        )  # one past the labels is refused as unknown, with the rest
        if not (named and integers):
            return
        numbers = sorted(n for t in integers for n in records[t])
        shown = ", ".join(map(str, numbers[:3])) + (", ..." if len(numbers) > 3 else "")
        example = integers[0]
        problem = (
            f"{source} mixes label names ({', '.join(_few(named))}) with integers "
            f"({', '.join(_few(integers))}; {plural(len(numbers), 'record')}: {shown}) "
            f"(read as an index, {example} would be {self.spec.label_names[int(example)]!r})"
        )
        fix = (
            f"write those records' labels as names of label_names {list(self.spec.label_names)}, "
            "or every label as its index"
        )
        raise TaskError(self.spec.name, f"{split} {self.spec.label_field!r}", problem, fix)

    def index(self, value: Any, split: str, number: int, source: str) -> int:
        text = self.text(value)
        if isinstance(text, str):
            if text in self.by_name:
                return self.by_name[text]
            if _is_index(text, self.spec):
                return int(text)
        names = list(self.spec.label_names)
        fix = f"label_names are {names} (or indices 0..{len(names) - 1}); fix label_names"
        if split != "train":  # the loop: in label_names without a training row, it is a warning
            fix += f", or remove the {split} rows with it (no training row can teach it)"
        if isinstance(text, str) and (like := self._names_like(text)):
            # 'NEG', pandas' True against "true": the data is what to fix, not label_names
            fix = (
                f"it is {' or '.join(map(repr, like))} in other case; clean the column (label "
                "names match case; spaces around a value are ignored)"
            )
        raise TaskError(
            self.spec.name,
            f"{split} {self.spec.label_field!r}",
            f"unknown label value {value!r} (record {number} of {source})",
            fix,
        )

    def _names_like(self, text: str) -> list[str]:
        """The label names `text` equals but for case and surrounding spaces."""
        folded = text.strip().casefold()
        return [name for name in self.spec.label_names if name.strip().casefold() == folded]


@dataclass(frozen=True)
class LabelForm:
    """How a split's label column writes its labels: as label names, or as indices (with text
    label names; integer names are read by name, and a column mixing both is refused)."""

    split: str
    source: str
    kind: str  # "names" or "indices"
    values: tuple[str, ...]

    def shown(self) -> str:
        return f"{self.source} as {self.kind} ({', '.join(_few(list(self.values)))})"


def check_same_form(spec: TaskSpec, forms: Iterable[LabelForm | None]) -> None:
    """Refuse train and dev that write their labels differently, one by name and the other as
    indices: read so, a 0 in dev is label_names[0] whatever the file meant by it (a dev file of
    1 = pos against label_names [pos, neg] was scored inverted, without a word)."""
    found = {form.kind: form for form in forms if form is not None}
    if len(found) < 2:
        return
    names, indices = found["names"], found["indices"]
    first = indices.values[0]
    problem = (
        f"the splits write labels differently: {names.shown()}, {indices.shown()}; "
        f"{indices.split}'s {first} would be read as {spec.label_names[int(first)]!r} "
        f"(label_names[{first}]), and nothing shows that is what the file means"
    )
    fix = (
        f"write both splits' labels the same way: names of label_names "
        f"{list(spec.label_names)}, or indices in that order"
    )
    raise TaskError(spec.name, f"{indices.split} {spec.label_field!r}", problem, fix)


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


def _few(texts: list[str], count: int = 5) -> list[str]:
    return texts[:count] + (["..."] if len(texts) > count else [])


def _is_index(text: str, spec: TaskSpec) -> bool:
    return bool(_INT.match(text)) and 0 <= int(text) < spec.num_labels
