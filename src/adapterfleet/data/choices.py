"""Multiple choice in the shapes data comes in: a task's `choices:` layout, read from YAML, and
how one record becomes (context, choices, answer index).

Layouts (one of `list` / `fields`; `context` is joined with spaces and is the first text of
every (context, choice) pair the encoder reads):

- a list column, optionally with the row's own labels of its choices (CommonsenseQA:
  `list: choices.text`, `labels: choices.label`; HellaSwag: `list: endings`); a dotted name
  reads into nested records (`choices.text` is `record["choices"]["text"]`);
- one column per choice (SocialIQA `fields: [answerA, answerB, answerC]`, Cosmos QA
  `answer0..3`);
- a sentence with a blank that each choice fills (Winogrande: `fill: sentence`,
  `fields: [option1, option2]`): as the Winogrande authors' BERT baseline, the text before the
  blank is the context and the choice followed by the rest of the sentence its pair.

The answer (`label_field`) is resolved per row, first match wins: (1) with `labels`, it must be
one of the row's labels and nothing else counts; (2) a label name (`label_names`); (3) an index
0..n-1; (4) a letter A, B, ... (case ignored); (5) exactly one choice's text. Every task has one
number of choices: a row with another count is refused, not padded (see `COUNT_FIX`).
"""

from __future__ import annotations

import ast
import contextlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from adapterfleet.data.answers import answer_index, answer_text
from adapterfleet.data.errors import TaskError
from adapterfleet.data.quality import RowRef, cell_text, check_once, is_blank
from adapterfleet.errors import allowed_keys, did_you_mean

if TYPE_CHECKING:
    from adapterfleet.data.readers import RawSplit
    from adapterfleet.data.tasks import TaskSpec

LAYOUT_KEYS = ("context", "list", "labels", "fields", "fill", "blank")
LAYOUT_EXAMPLE = (
    "e.g. {context: [question], list: choices.text, labels: choices.label} or "
    "{context: [context, question], fields: [answerA, answerB, answerC]}"
)
DEFAULT_BLANK = "_"
COUNT_FIX = (
    "rows with another number of choices are refused, not padded: each of the paper's tasks has "
    "one count, and a padded choice would need a mask through the head, the loss and the "
    "predictions; drop or fix those rows, or declare each count as its own task"
)
TEXT_FIX = (
    "fix the record; a TSV/CSV cell is always text, so nested choices need a JSONL, JSON or "
    "Parquet file (in a TSV/CSV give them as a JSON list in their own column, or choices.fields)"
)
_MISSING = object()
Fail = Callable[..., TaskError]


@dataclass(frozen=True)
class ChoiceLayout:
    """Where a multiple-choice task's context, choices and their labels are in a record."""

    context: tuple[str, ...] = ()
    list_column: str | None = None
    labels_column: str | None = None
    fields: tuple[str, ...] = ()
    fill: str | None = None
    blank: str = DEFAULT_BLANK

    @classmethod
    def flat(cls, question_field: str, choice_fields: Sequence[str]) -> ChoiceLayout:
        """The older flat declaration: `question_field` + `choice_fields`."""
        return cls(context=(question_field,), fields=tuple(choice_fields))

    @classmethod
    def from_mapping(cls, raw: Any, fail: Fail) -> ChoiceLayout:
        """Validate a task's `choices:` mapping; `fail(key, problem, fix)` makes the error."""
        return _parse(raw, fail)

    @property
    def count(self) -> int | None:
        """The number of choices when the declaration fixes it (one column per choice)."""
        return len(self.fields) or None

    def columns(self) -> list[tuple[str, str]]:
        """(key, column) of every field the layout reads, the label excepted."""
        out = [("choices.context", name) for name in self.context]
        if self.fill is not None:
            out.append(("choices.fill", self.fill))
        if self.list_column is not None:
            out.append(("choices.list", self.list_column))
        if self.labels_column is not None:
            out.append(("choices.labels", self.labels_column))
        out += [("choices.fields", name) for name in self.fields]
        return out

    def to_mapping(self) -> dict[str, Any]:
        out: dict[str, Any] = {"context": list(self.context)} if self.context else {}
        optional = {"list": self.list_column, "labels": self.labels_column, "fill": self.fill}
        out |= {k: v for k, v in optional.items() if v is not None}
        if self.fields:
            out["fields"] = list(self.fields)
        if self.fill is not None:
            out["blank"] = self.blank
        return out


def _parse(raw: Any, fail: Fail) -> ChoiceLayout:
    if not isinstance(raw, Mapping):
        raise fail("choices", f"expected a mapping, got {type(raw).__name__}", LAYOUT_EXAMPLE)
    for key in raw:
        if key not in LAYOUT_KEYS:
            problem = f"unknown key{did_you_mean([key], LAYOUT_KEYS)}"
            raise fail(f"choices.{key}", problem, allowed_keys(LAYOUT_KEYS))
    names = _names(raw, fail)
    if (names["list"] is None) == (not names["fields"]):
        raise fail("choices", "declare exactly one of list and fields", LAYOUT_EXAMPLE)
    if names["labels"] is not None and names["list"] is None:
        raise fail("choices.labels", "only with choices.list", "remove it or use choices.list")
    if names["fields"] and len(names["fields"]) < 2:
        raise fail("choices.fields", "needs at least 2 fields", "one column per choice")
    blank = raw.get("blank", DEFAULT_BLANK)
    if "blank" in raw and names["fill"] is None:
        raise fail("choices.blank", "only with choices.fill", "add fill: <sentence field>")
    if not isinstance(blank, str) or not blank:
        raise fail("choices.blank", f"expected a non-empty string, got {blank!r}", "e.g. _")
    if not names["context"] and names["fill"] is None:
        raise fail("choices.context", "missing", "name the context/question field(s)")
    return ChoiceLayout(
        names["context"], names["list"], names["labels"], names["fields"], names["fill"], blank
    )


def _names(raw: Mapping[str, Any], fail: Fail) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in ("list", "labels", "fill"):
        value = raw.get(key)
        if value is not None and (not isinstance(value, str) or not value):
            raise fail(f"choices.{key}", f"expected a column name, got {value!r}")
        out[key] = value
    for key in ("context", "fields"):
        value = raw.get(key, [])
        value = [value] if isinstance(value, str) else value
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise fail(f"choices.{key}", f"expected a list of column names, got {value!r}")
        if len(set(value)) != len(value):
            raise fail(f"choices.{key}", f"names repeat in {value!r}")
        out[key] = tuple(value)
    return out


# -- records ---------------------------------------------------------------------------------


def value_at(record: Mapping[str, Any], column: str) -> Any:
    """`record[column]`, else the dotted path into nested mappings; `_MISSING` when absent (or
    `record` is not a mapping: `in` on a string would test for a substring)."""
    if isinstance(record, Mapping) and column in record:
        return record[column]
    node: Any = record
    for part in column.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return _MISSING
        node = node[part]
    return node


def check_columns(spec: TaskSpec, split: str, raw: RawSplit, *, labels: bool = False) -> None:
    """Every column the layout reads (with `labels`, the answer and the row's labels too; a
    prediction needs neither) is in the split: refused otherwise, naming the key, the columns
    there and, for a dotted name, the keys of the nested record."""
    wanted = spec.choice_layout.columns()
    if labels:
        wanted.append(("label_field", spec.label_field))
    else:
        wanted = [(key, column) for key, column in wanted if key != "choices.labels"]
    for key, column in wanted:
        top = column if column in raw.columns else column.split(".")[0]
        if top not in raw.columns:
            there = ", ".join(raw.columns) or "(none)"
            fix = f"fix {key} or {split}.rename"
            if split == "input":  # --columns names a file's columns only with --no-header
                fix = f"give the file a column {column!r} (a tsv/csv without a header line: "
                fix += "--no-header and --columns)"
            there = f"columns there: {there}"
            raise TaskError(
                spec.name,
                f"{split} column {column!r} ({key})",
                f"not found in {raw.source}",
                f"{there}; {fix}",
            )
        if top != column:
            _check_nested(spec, split, raw, key, column)
    check_once(spec, split, raw, wanted)


def _check_nested(spec: TaskSpec, split: str, raw: RawSplit, key: str, column: str) -> None:
    top, rest = column.split(".", 1)
    first = next((r[top] for r in raw.rows if r.get(top) is not None), None)
    if first is None or isinstance(first, str) or value_at(first, rest) is not _MISSING:
        return  # text is refused with its record, by `_at`
    keys = ", ".join(first) if isinstance(first, Mapping) else f"a {type(first).__name__}"
    raise TaskError(
        spec.name,
        f"{split} column {column!r} ({key})",
        f"{top!r} in {raw.source} has no {rest!r} (it holds {keys})",
        f"fix {key}",
    )


def choice_rows(
    spec: TaskSpec, split: str, raw: RawSplit, first: int = 1
) -> tuple[list[tuple[Any, ...]], list[int]]:
    """(context, choice 1..n, answer index) per record, and the numbers of the records dropped
    for a missing or empty value. `first` is the number of the first record (a `rows:` slice
    starts later in its file)."""
    check_columns(spec, split, raw, labels=True)
    rows: list[tuple[Any, ...]] = []
    missing: list[int] = []
    for number, record in enumerate(raw.rows, start=first):
        where = RowRef(spec, split, raw.source, number)
        texts = record_texts(spec, record, where)
        answer = _at(record, spec.label_field, "label_field", where)
        if texts is None or answer is _MISSING or is_blank(answer):
            missing.append(number)
            continue
        labels = _row_labels(spec, record, len(texts) - 1, where)
        if labels is _MISSING:
            missing.append(number)
            continue
        rows.append((*texts, answer_index(spec, answer, texts[1:], labels, where)))
    return rows, missing


def record_texts(
    spec: TaskSpec, record: Mapping[str, Any], where: RowRef
) -> tuple[str, ...] | None:
    """(context, choice 1..n) of one record; None when a value is missing or a choice empty
    (a CSV's or TSV's empty cell is JSON's null: the row is skipped in every format), or the
    context is empty (no question to answer). A count other than the task's,
    a list that is not a list, a value that is not text (a choice may be a number) and a
    sentence without its blank are refused."""
    layout = spec.choice_layout
    texts = _choice_texts(layout, record, where)
    context = [_present(_at(record, name, "choices.context", where)) for name in layout.context]
    if texts is None or None in texts or None in context:
        return None
    parts = [
        cell_text(v, f"column {n!r} (choices.context)", where, empty=True) or ""
        for v, n in zip(context, layout.context, strict=True)
    ]
    if layout.context and layout.fill is None and not any(p.strip() for p in parts):
        return None
    if len(texts) != spec.num_labels:
        names = list(spec.label_names)
        problem = f"{len(texts)} choices, the task has {spec.num_labels} (label_names {names})"
        raise where.error("choices", problem, COUNT_FIX)
    if layout.fill is not None:
        key = f"column {layout.fill!r} (choices.fill)"
        sentence = cell_text(_present(_at(record, layout.fill, "choices.fill", where)), key, where)
        if sentence is None:
            return None
        prefix, texts = _filled(sentence, texts, layout.blank, where)
        parts.append(prefix)
    return (" ".join(p for p in parts if p), *texts)


def _choice_texts(
    layout: ChoiceLayout, record: Mapping[str, Any], where: RowRef
) -> list[str | None] | None:
    """The texts of a record's choices (None in it: a choice missing; None: the list is)."""
    if layout.list_column is not None:
        values = _as_list(
            _at(record, layout.list_column, "choices.list", where), "choices.list", where
        )
        keys = [f"column {layout.list_column!r} (choices.list)"] * len(values or ())
    else:
        values = [_at(record, name, "choices.fields", where) for name in layout.fields]
        keys = [f"column {name!r} (choices.fields)" for name in layout.fields]
    if values is None:
        return None
    return [
        cell_text(_present(v), key, where, numbers=True)
        for v, key in zip(values, keys, strict=True)
    ]


def _at(record: Mapping[str, Any], column: str, role: str, where: RowRef) -> Any:
    """`value_at`, refusing a record where text stands in a dotted column's way: a mapping of
    choices written as a string (as every TSV/CSV cell is) is not read, nor skipped as missing."""
    value = value_at(record, column)
    if value is not _MISSING:
        return value
    node: Any = record
    parts = column.split(".")
    for depth, part in enumerate(parts):
        if isinstance(node, str):
            shown = repr(node) if len(repr(node)) <= 40 else repr(node)[:37] + "..."
            problem = (
                f"{'.'.join(parts[:depth])!r} holds text ({shown}), not a mapping with {part!r}"
            )
            raise where.error(f"column {column!r} ({role})", problem, TEXT_FIX)
        if not isinstance(node, Mapping) or part not in node:
            break
        node = node[part]
    return value


def _present(value: Any) -> Any:
    """`value`, None for a column the record lacks."""
    return None if value is _MISSING else value


def _filled(sentence: str, options: list[str], blank: str, where: RowRef) -> tuple[str, list[str]]:
    """The text before the blank; each option followed by the rest of the sentence."""
    if sentence.count(blank) != 1:
        found = sentence.count(blank)
        raise where.error(
            "choices.fill",
            f"the sentence holds {found} blanks {blank!r}, not one",
            "fix the row, or set choices.blank to the placeholder the sentences use",
        )
    before, after = sentence.split(blank)
    return before.strip(), [f"{option}{after}".strip() for option in options]


def _as_list(value: Any, key: str, where: RowRef) -> list[Any] | None:
    """A list column's value; a JSON list written as text (a CSV/TSV cell) is read as one."""
    if value is None or value is _MISSING:
        return None
    if isinstance(value, str) and value.lstrip().startswith("["):
        value = _list_text(value)
    if hasattr(value, "tolist"):  # a numpy array from a Parquet or hub dataset
        value = value.tolist()
    if not isinstance(value, list | tuple):
        kind = "text" if isinstance(value, str) else f"a {type(value).__name__}"
        fix = 'in a CSV/TSV cell write the list as JSON text (["a", "b"]); for one column per '
        raise where.error(key, f"holds {kind}, not a list", fix + "choice use choices.fields")
    return list(value)


def _list_text(text: str) -> Any:
    """A list written as text: JSON, or Python's form of a list of strings and numbers (pandas
    writes a list column to CSV as `['a', "b's"]`); other text stays text."""
    with contextlib.suppress(ValueError):  # not JSON, or an integer of over 4,300 digits
        return json.loads(text)
    with contextlib.suppress(ValueError, SyntaxError, MemoryError, RecursionError):
        value = ast.literal_eval(text)  # literals only: nothing in the cell runs
        if isinstance(value, list) and all(isinstance(v, str | int | float) for v in value):
            return value
    return text


def holds(record: Mapping[str, Any], column: str) -> bool:
    """Whether `record` has `column` (a dotted name: in its nested mappings), even as null."""
    return value_at(record, column) is not _MISSING


def labels_of(spec: TaskSpec, record: Mapping[str, Any], where: RowRef) -> tuple[str, ...] | None:
    """The row's own labels of its choices as training reads them, refused as training refuses
    them (not one per choice, one named twice); None when the record has no value for them."""
    labels = _row_labels(spec, record, spec.num_labels, where)
    return None if labels is _MISSING or labels is None else tuple(labels)


def _row_labels(spec: TaskSpec, record: Mapping[str, Any], count: int, where: RowRef) -> Any:
    """The row's own labels of its choices (`choices.labels`), None without that column; they
    must be label_names in some order, as `predict` names its columns by them."""
    column = spec.choice_layout.labels_column
    if column is None:
        return None
    labels = _as_list(_at(record, column, "choices.labels", where), "choices.labels", where)
    if labels is None:
        return _MISSING
    if len(labels) != count:
        problem = f"{len(labels)} labels for {count} choices"
        raise where.error("choices.labels", problem, "give one label per choice")
    texts = [answer_text(v) for v in labels]
    if len(set(texts)) != len(texts):  # the answer key would name more than one choice
        problem = f"the row's labels {texts} name a choice twice"
        raise where.error("choices.labels", problem, "give each choice its own label")
    names = list(spec.label_names)
    if sorted(texts) != sorted(names):  # predict names each prob_<label> column by them
        problem = f"the row's labels {texts} are not the task's label_names {names}"
        fix = "give each row the labels label_names lists (in any order), or list the labels the "
        raise where.error("choices.labels", problem, fix + "rows use in label_names")
    return texts
