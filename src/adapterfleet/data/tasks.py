"""Task declarations: `TaskSpec`, validated from one task's YAML mapping."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from adapterfleet.data.choices import LAYOUT_EXAMPLE, ChoiceLayout
from adapterfleet.data.compressed import decompress_fix
from adapterfleet.data.encodings import parse_encoding
from adapterfleet.data.errors import TaskError
from adapterfleet.data.numbers import parse_fraction
from adapterfleet.data.quality import SKIP_KEY, parse_skip_limit
from adapterfleet.data.regression import RANGE_KEY, parse_range
from adapterfleet.data.slices import check_rows_apart, row_range
from adapterfleet.data.sources import (
    EXTENSIONS,
    FILE_SPLIT_KEYS,
    FORMATS,
    HUB_SPLIT_KEYS,
    SplitSource,
    hub_under_split,
)
from adapterfleet.errors import allowed_keys, did_you_mean, user_path

POOLINGS = ("cls", "mean", "last")
KINDS = ("classification", "multiple_choice", "regression")
# The metrics a task reports when it names none (the config checks names against the type).
DEFAULT_METRICS = {"regression": ("pearson", "spearman", "mse")}
TASK_KEYS = (
    "type",
    "train",
    "dev",
    "hub",
    "hub_config",
    "text_fields",
    "question_field",
    "choice_fields",
    "choices",
    "label_field",
    "label_names",
    "dev_fraction",
    "seed",
    "max_train_examples",
    "max_dev_examples",
    "metrics",
    RANGE_KEY,
    "pooling",
    SKIP_KEY,
)
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
# A multiple-choice task declares its context and choices under `choices:` (the README's form;
# `question_field` + `choice_fields` is the older flat one, still read)
_CHOICES_FIX = f"declare the context and the choices under choices:, {LAYOUT_EXAMPLE}"


@dataclass(frozen=True)
class TaskSpec:
    """One task: where its data is, which fields mean what, its labels, splits and metrics."""

    name: str
    train: SplitSource
    label_names: tuple[str, ...]
    kind: str = "classification"
    dev: SplitSource | None = None
    hub: str | None = None
    hub_config: str | None = None
    text_fields: tuple[str, ...] = ()
    question_field: str | None = None
    choice_fields: tuple[str, ...] = ()
    choices: ChoiceLayout | None = None  # the `choices:` layout (data/choices.py)
    label_field: str = "label"
    dev_fraction: float | None = None
    seed: int = 0
    max_train_examples: int | None = None
    max_dev_examples: int | None = None
    metrics: tuple[str, ...] = ("accuracy",)
    value_range: tuple[float, float] | None = None  # regression: `range`, the labels' bounds
    pooling: str | None = None  # cls | mean | last; None: what the base model's family does
    max_skipped_fraction: float | None = None  # of a split's records; None: quality.SKIP_LIMIT
    demo_seed: int | None = None  # a demo task: `load_task` writes its files (data/demo.py)

    @property
    def num_labels(self) -> int:
        return len(self.label_names)

    @property
    def is_regression(self) -> bool:
        return self.kind == "regression"

    @property
    def is_multiple_choice(self) -> bool:
        return self.kind == "multiple_choice"

    @property
    def choice_layout(self) -> ChoiceLayout:
        """Where the choices are: the `choices:` layout, else the flat question/choice fields."""
        if self.choices is not None:
            return self.choices
        assert self.question_field is not None, "not a multiple-choice task"
        return ChoiceLayout.flat(self.question_field, self.choice_fields)

    @property
    def is_pair(self) -> bool:
        return len(self.text_fields) == 2

    @classmethod
    def from_mapping(cls, name: str, mapping: Any, data_root: Path | str) -> TaskSpec:
        """Validate one task's mapping; relative paths are taken from ``data_root``."""
        return _Parser(name, Path(data_root)).task(mapping)

    def to_mapping(self) -> dict[str, Any]:
        """The YAML form of this spec (paths absolute); `from_mapping` of it gives it back
        (`demo_seed` aside: where the files come from, not what they hold)."""
        out: dict[str, Any] = {
            "type": self.kind,
            "train": self.train.to_mapping(),
            "label_field": self.label_field,
            "seed": self.seed,
            "metrics": list(self.metrics),
        }
        optional = {
            "dev": self.dev.to_mapping() if self.dev else None,
            "hub": self.hub,
            "hub_config": self.hub_config,
            "text_fields": list(self.text_fields) or None,
            "question_field": self.question_field,
            "choice_fields": list(self.choice_fields) or None,
            "label_names": list(self.label_names) or None,  # none for regression
            "choices": self.choices.to_mapping() if self.choices else None,
            "dev_fraction": self.dev_fraction,
            "max_train_examples": self.max_train_examples,
            "max_dev_examples": self.max_dev_examples,
            RANGE_KEY: list(self.value_range) if self.value_range else None,
            "pooling": self.pooling,
            SKIP_KEY: self.max_skipped_fraction,
        }
        out.update({k: v for k, v in optional.items() if v is not None})
        return out


def _suggested_name(name: object) -> str:
    """A task name that the rules take, made from a refused one ('My Task' -> My_Task)."""
    suggested = re.sub(r"[^A-Za-z0-9_-]+", "_", str(name)).strip("_-")
    return suggested or "task1"


class _Parser:
    """Checks one task mapping; every failure is a one-line `TaskError`."""

    def __init__(self, name: str, data_root: Path) -> None:
        self.name = name
        self.root = data_root

    def fail(self, key: str, problem: str, fix: str = "") -> TaskError:
        return TaskError(self.name, key, problem, fix)

    def task(self, raw: Any) -> TaskSpec:
        if not isinstance(self.name, str) or not _NAME.match(self.name):
            problem = f"{self.name!r}: a task name starts with a letter or a digit"
            problem += ", then letters, digits, '_' and '-'"  # '.' too here; check_task_names
            raise self.fail("name", problem, f"rename it, e.g. {_suggested_name(self.name)}")
        if not isinstance(raw, Mapping):
            raise self.fail("task", f"expected a mapping of keys, got {type(raw).__name__}")
        self.unknown(raw, TASK_KEYS, "key")
        kind = raw.get("type", "classification")
        if kind not in KINDS:
            raise self.fail("type", f"unknown type {kind!r}", f"use one of {', '.join(KINDS)}")
        hub = self.opt_str(raw, "hub")
        hub_config = self.opt_str(raw, "hub_config")
        if hub_config is not None and hub is None:
            raise self.fail("hub_config", "given without hub", "add hub: <id or directory>")
        if hub is not None:
            local = self.path(hub)
            hub = str(local) if local.is_dir() else hub
        if "train" not in raw:
            raise self.fail("train", "missing required key", "declare the train split's source")
        train = self.split("train", raw["train"], hub is not None)
        dev = None if raw.get("dev") is None else self.split("dev", raw["dev"], hub is not None)
        dev_fraction = raw.get("dev_fraction")
        if dev_fraction is not None:
            dev_fraction = parse_fraction(
                self.fail, "dev_fraction", dev_fraction, ends=False, example=0.1
            )
        if (dev is None) == (dev_fraction is None):
            fix = "give dev: <file or split>, or dev_fraction: 0.1 to hold out a tenth of train"
            raise self.fail("dev", "declare exactly one of dev and dev_fraction", fix)
        same = dev is not None and (dev.path, dev.split) == (train.path, train.split)
        check_rows_apart(self.fail, train.rows, dev.rows if dev else None, same=same)
        text_fields, question, choices = self.fields(raw, kind)
        layout = self.choice_layout(raw, kind)
        label_field = self.opt_str(raw, "label_field") or "label"
        self.label_apart(label_field, (*text_fields, question, *choices), layout)
        return TaskSpec(
            name=self.name,
            kind=kind,
            train=train,
            dev=dev,
            hub=hub,
            hub_config=hub_config,
            text_fields=text_fields,
            question_field=question,
            choice_fields=choices,
            choices=layout,
            label_field=label_field,
            label_names=self.label_names(raw, kind, layout.fields if layout else choices),
            dev_fraction=dev_fraction,
            seed=self.opt_int(raw, "seed", minimum=0) or 0,
            max_train_examples=self.opt_int(raw, "max_train_examples", minimum=1),
            max_dev_examples=self.opt_int(raw, "max_dev_examples", minimum=1),
            metrics=self.str_list(raw, "metrics", default=DEFAULT_METRICS.get(kind, ("accuracy",))),
            value_range=self.value_range(raw, kind),
            pooling=self.pooling(raw),
            max_skipped_fraction=parse_skip_limit(self.fail, raw.get(SKIP_KEY)),
        )

    def pooling(self, raw: Mapping[str, Any]) -> str | None:
        value = raw.get("pooling")
        if value is not None and value not in POOLINGS:
            fix = "cls (the first token), mean (of the real tokens) or last (the last real token)"
            raise self.fail("pooling", f"{value!r} is unknown", f"use {fix}")
        return value

    def value_range(self, raw: Mapping[str, Any], kind: str) -> tuple[float, float] | None:
        if raw.get(RANGE_KEY) is None:  # `range: null` (`-o tasks.x.range=null`): none
            return None
        if kind != "regression":
            raise self.fail(RANGE_KEY, "only for type regression", "remove it or set type")
        return parse_range(self.name, raw[RANGE_KEY])

    def fields(self, raw: Mapping[str, Any], kind: str) -> tuple[tuple, str | None, tuple]:
        if kind != "multiple_choice":
            for key in ("question_field", "choice_fields"):
                if key in raw:
                    raise self.fail(key, "only for type multiple_choice", "use text_fields")
            text = raw.get("text_fields")
            text = [text] if isinstance(text, str) else text
            if "text_fields" not in raw:
                raise self.fail("text_fields", "missing required key", "name 1 or 2 text fields")
            fields = self.str_list({"text_fields": text}, "text_fields")
            if not 1 <= len(fields) <= 2:
                raise self.fail("text_fields", f"{len(fields)} fields given", "name 1 or 2 fields")
            return fields, None, ()
        if "text_fields" in raw:
            raise self.fail("text_fields", "not for multiple_choice", _CHOICES_FIX)
        if "choices" in raw:
            return (), None, ()  # the layout is read by choice_layout
        question = self.opt_str(raw, "question_field")
        if question is None and "choice_fields" not in raw:
            raise self.fail("choices", "missing", _CHOICES_FIX)
        if question is None:
            raise self.fail("question_field", "missing required key", "name the question field")
        choices = self.str_list(raw, "choice_fields")
        if len(choices) < 2:
            raise self.fail("choice_fields", "needs at least 2 fields", "list the choice fields")
        return (), question, choices

    def label_apart(self, label: str, inputs: tuple, layout: ChoiceLayout | None) -> None:
        """The answer is never part of the model's input (a label column named as a text field,
        or as a context or choice column, would be learnt from itself and asked of `predict`)."""
        named = [c for _, c in layout.columns()] if layout is not None else list(inputs)
        if label in named:
            problem = f"{label!r} is the label_field and also an input column of the model"
            raise self.fail("label_field", problem, "name the label's column in label_field only")

    def choice_layout(self, raw: Mapping[str, Any], kind: str) -> ChoiceLayout | None:
        if "choices" not in raw:
            return None
        if kind != "multiple_choice":
            raise self.fail("choices", "only for type multiple_choice", "set type")
        for key in ("question_field", "choice_fields"):
            if key in raw:
                raise self.fail(key, "given with choices", "declare the layout in choices only")
        return ChoiceLayout.from_mapping(raw["choices"], self.fail)

    def label_names(self, raw: Mapping[str, Any], kind: str, choices: tuple) -> tuple[str, ...]:
        names = raw.get("label_names")
        if kind == "regression":
            if names is not None:
                raise self.fail("label_names", "not for type regression", "remove it")
            return ()
        if names is None and kind == "multiple_choice" and choices:
            return tuple(choices)
        if names is None and kind == "multiple_choice":
            fix = "one name per choice, e.g. [A, B, C, D, E] or [0, 1, 2, 3]"
            problem = "missing: with choices.list the number of choices comes from label_names"
            raise self.fail("label_names", problem, fix)
        if names is None:
            raise self.fail("label_names", "missing required key", "list the labels, e.g. [0, 1]")
        if isinstance(names, list) and any(isinstance(n, bool) for n in names):
            problem = f"YAML read {names} as booleans (unquoted yes/no/true/false/on/off are)"
            fix = 'quote the names, e.g. ["no", "yes"]; JSON true/false match "true"/"false"'
            raise self.fail("label_names", problem, fix)
        if not isinstance(names, list) or any(isinstance(n, dict | list) for n in names):
            raise self.fail("label_names", "expected a list of names", "e.g. [neg, pos]")
        out = tuple(str(n) for n in names)
        if len(out) < 2 or len(set(out)) != len(out):
            raise self.fail("label_names", f"need 2 or more distinct names, got {list(out)}")
        if kind == "multiple_choice" and choices and len(out) != len(choices):
            raise self.fail("label_names", "one name per choice field", f"give {len(choices)}")
        return out

    def split(self, key: str, raw: Any, hub: bool) -> SplitSource:
        if isinstance(raw, str):
            raw = {"split" if hub else "path": raw}
        if not isinstance(raw, Mapping):
            raise self.fail(key, f"expected a path or a mapping, got {type(raw).__name__}")
        if (misplaced := hub_under_split(key, raw)) is not None:
            raise self.fail(*misplaced)
        allowed = HUB_SPLIT_KEYS if hub else FILE_SPLIT_KEYS
        self.unknown(raw, allowed, f"{key} key", prefix=f"{key}.")
        rename = raw.get("rename") or {}
        if not isinstance(rename, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in rename.items()
        ):
            raise self.fail(f"{key}.rename", "expected a mapping column: new_name")
        twice = sorted({v for v in rename.values() if list(rename.values()).count(v) > 1})
        if twice:
            problem = f"more than one column renamed to {', '.join(map(repr, twice))}"
            raise self.fail(f"{key}.rename", problem, "give each column its own new name")
        if hub:
            default = "train" if key == "train" else "validation"
            split = self.opt_str(raw, "split", f"{key}.split") or default
            rows = row_range(self.fail, key, raw.get("rows"))
            return SplitSource(split=split, rename=dict(rename), rows=rows)
        if not isinstance(raw.get("path"), str) or not raw["path"]:
            raise self.fail(f"{key}.path", "missing path", "give the file's path")
        path = self.path(raw["path"])
        fmt = raw.get("format") or EXTENSIONS.get(path.suffix.lower())
        if fmt not in FORMATS:
            fix = decompress_fix(path) or f"set {key}.format to one of {', '.join(FORMATS)}"
            problem = f"unknown format {fmt!r}" if fmt else f"no format known for {path.suffix!r}"
            raise self.fail(f"{key}.format", f"{problem} ({path.name})", fix)
        header = raw.get("header", True)
        if not isinstance(header, bool):
            raise self.fail(f"{key}.header", f"expected true or false, got {header!r}")
        columns = None
        if "columns" in raw:
            columns = self.str_list(raw, "columns", label=f"{key}.columns")
            if fmt not in ("tsv", "csv") or header:
                raise self.fail(f"{key}.columns", "only for tsv/csv files with header: false")
        elif fmt in ("tsv", "csv") and not header:
            raise self.fail(f"{key}.columns", "a file without header needs columns", "name them")
        encoding = parse_encoding(self.fail, key, self.opt_str(raw, "encoding", f"{key}.encoding"))
        rows = row_range(self.fail, key, raw.get("rows"))
        quotes = raw.get("quotes")
        if quotes is not None and (not isinstance(quotes, bool) or fmt not in ("tsv", "csv")):
            problem = f"expected true or false for a tsv/csv file, got {quotes!r} ({fmt})"
            raise self.fail(f"{key}.quotes", problem, "remove it, or set it for a tsv/csv file")
        return SplitSource(path, fmt, header, columns, encoding, dict(rename), None, rows, quotes)

    def path(self, value: str) -> Path:
        path = Path(value).expanduser()
        return path if path.is_absolute() else user_path(self.root / path, f"task {self.name!r}")

    def unknown(self, raw: Mapping, allowed: tuple, what: str, prefix: str = "") -> None:
        for key in raw:
            if key not in allowed:
                problem = f"unknown {what}{did_you_mean([key], allowed)}"
                raise self.fail(f"{prefix}{key}", problem, allowed_keys(allowed))

    def opt_str(self, raw: Mapping, key: str, label: str | None = None) -> str | None:
        value = raw.get(key)
        if value is not None and (not isinstance(value, str) or not value):
            raise self.fail(label or key, f"expected a non-empty string, got {value!r}")
        return value

    def opt_int(self, raw: Mapping, key: str, minimum: int) -> int | None:
        value = raw.get(key)
        if value is None:
            return None
        if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
            raise self.fail(key, f"expected an integer >= {minimum}, got {value!r}")
        return value

    def str_list(
        self, raw: Mapping, key: str, default: tuple | None = None, label: str | None = None
    ) -> tuple[str, ...]:
        value = raw.get(key)
        if value is None and default is not None:
            return default
        ok = isinstance(value, list) and value and all(isinstance(v, str) and v for v in value)
        if not ok:
            raise self.fail(label or key, f"expected a list of names, got {value!r}")
        if len(set(value)) != len(value):
            raise self.fail(label or key, f"names repeat in {value!r}")
        return tuple(value)
