"""`load_task`: a `TaskSpec` becomes normalised train/dev `datasets.Dataset`s."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from adapterfleet._hub import cache_only_while_unreachable, hub_unreachable
from adapterfleet.console import plural
from adapterfleet.data.choices import choice_rows
from adapterfleet.data.demo import ensure_demo_files
from adapterfleet.data.errors import TaskError
from adapterfleet.data.labels import LabelForm, LabelMap, check_same_form
from adapterfleet.data.quality import (
    RowRef,
    cell_text,
    check_dev_values,
    check_labels,
    check_once,
    check_skipped,
    is_blank,
    other_case,
    skip_places,
)
from adapterfleet.data.readers import RawSplit, read_file
from adapterfleet.data.regression import NumberLabel, label_feature
from adapterfleet.data.slices import sliced
from adapterfleet.data.tasks import SplitSource, TaskSpec

if TYPE_CHECKING:
    import datasets

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class TaskData:
    """A loaded task. Columns: ``text_a``, ``text_b`` (pairs only), ``label``; multiple choice:
    ``question``, ``choices``, ``label``. ``skipped`` counts malformed rows per split read."""

    spec: TaskSpec
    train: datasets.Dataset
    dev: datasets.Dataset
    skipped_by_split: dict[str, int]

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def label_names(self) -> tuple[str, ...]:
        return self.spec.label_names

    @property
    def num_labels(self) -> int:
        return self.spec.num_labels

    @property
    def is_multiple_choice(self) -> bool:
        return self.spec.is_multiple_choice

    @property
    def is_regression(self) -> bool:
        return self.spec.is_regression

    @property
    def skipped(self) -> int:
        return sum(self.skipped_by_split.values())

    def split(self, name: str) -> datasets.Dataset:
        return {"train": self.train, "dev": self.dev}[name]


def load_task(spec: TaskSpec) -> TaskData:
    """Load, check and normalise a task; every problem is a one-line `TaskError` (what the rows
    must be: `data/quality.py`). A demo task's files are written first (`data/demo.py`)."""
    if spec.demo_seed is not None:
        ensure_demo_files(spec)
    skipped: dict[str, int] = {}
    forms: list[LabelForm | None] = []
    train, _ = _rows(spec, "train", spec.train, skipped, forms)
    if spec.dev is not None:
        dev, numbers = _rows(spec, "dev", spec.dev, skipped, forms)
        check_same_form(spec, forms)
        train = _subsample(train, spec.max_train_examples, (spec.seed, 1))
        pairs = list(zip(dev, numbers, strict=True))
        kept = _subsample(pairs, spec.max_dev_examples, (spec.seed, 2))
        dev, numbers = [row for row, _ in kept], [number for _, number in kept]
        if not _warn_if_dev_is_train(spec, spec.train, spec.dev):  # of the rows it uses
            _warn_dev_rows_in_train(spec, train, dev, numbers)
    else:
        _nonempty(spec, "train", train, skipped)
        train, dev = _hold_out(spec, train)
        train = _subsample(train, spec.max_train_examples, (spec.seed, 1))
        dev = _subsample(dev, spec.max_dev_examples, (spec.seed, 2))
    _nonempty(spec, "train", train, skipped)
    _nonempty(spec, "dev", dev, skipped)
    check_labels(spec, train)
    check_dev_values(spec, dev)
    _warn_unseen_labels(spec, train, dev)
    return TaskData(spec, _dataset(spec, train), _dataset(spec, dev), skipped)


def _separator_hint(columns: list[str], split: str) -> str:
    """A header read as one column that holds another separator: the file's is not the one
    its format reads (`.csv`: commas, `.tsv`: tabs)."""
    names = {"\t": "tabs", ",": "commas", ";": "semicolons", "|": "bars"}
    found = [name for sep, name in names.items() if len(columns) == 1 and sep in columns[0]]
    if not found:
        return ""
    return (
        f" (the header is one column: the file is separated by {found[0]}; set {split}.format: "
        "tsv for tabs or csv for commas, or save it with one of those)"
    )


def _warn_unseen_labels(spec: TaskSpec, train: list, dev: list) -> None:
    """Said, not refused: a label no training row has is one the head never learns to give,
    while dev still counts it."""
    if spec.is_regression or spec.is_multiple_choice:
        return
    seen = {row[-1] for row in train}
    unseen = [i for i in range(len(spec.label_names)) if i not in seen]
    if unseen:
        in_dev = sum(row[-1] in unseen for row in dev)
        logger.warning(
            "task %r: no training row has the label(s) %s (%s %s); the head never learns to "
            "give them: add training rows for them, or drop them from label_names%s",
            spec.name,
            ", ".join(repr(spec.label_names[i]) for i in unseen),
            plural(in_dev, "dev row"),
            "does" if in_dev == 1 else "do",
            " and remove those dev rows" if in_dev else "",
        )


def _warn_if_dev_is_train(spec: TaskSpec, train: SplitSource, dev: SplitSource) -> bool:
    """Said, not refused (a smoke test may read one small file twice): dev rows that are the
    train rows make the dev metric, which picks the best epoch and adapter, a training score.
    Whether it was said."""
    if train.rows is not None or dev.rows is not None:
        return False  # slices of one file are checked apart when the config is read
    same_file = train.path is not None and dev.path is not None
    same_file = same_file and Path(train.path).resolve() == Path(dev.path).resolve()
    if same_file or (train.split is not None and train.split == dev.split):
        logger.warning(
            "task %r: dev reads the same records as train (%s): its dev metric measures "
            "training data; give dev its own file or split, or disjoint rows: slices",
            spec.name,
            train.path or f"split {train.split}",
        )
        return True
    return False


def _warn_dev_rows_in_train(spec: TaskSpec, train: list, dev: list, numbers: list[int]) -> None:
    """Said, not refused (GLUE's own dev sets share a few rows with train): dev rows copied
    from train (the same texts and label) are scored as seen data. One pass over each split,
    of the rows the task uses (after max_train_examples and max_dev_examples: the whole files'
    count named 1500 dev rows of a task that scores 100)."""
    seen = set(train)
    copied = [number for row, number in zip(dev, numbers, strict=True) if row in seen]
    if copied:
        records = " and ".join(map(str, copied[:2]))
        logger.warning(
            "task %r: %d of %d dev rows (%.1f%%) are also in train, the same texts and label "
            "(dev records %s%s): the dev metric scores them as seen data; drop them from dev for "
            "a score of unseen rows",
            spec.name,
            len(copied),
            len(dev),
            100 * len(copied) / len(dev),
            records,
            ", ..." if len(copied) > 2 else "",
        )


def _rows(
    spec: TaskSpec,
    split: str,
    source: SplitSource,
    skipped: dict[str, int],
    forms: list[LabelForm | None],
) -> tuple[list[tuple[Any, ...]], list[int]]:
    """The split's rows, and the record number of each; how many were skipped into `skipped`,
    how its label column writes labels into `forms`."""
    if spec.hub is not None:
        raw = _read_hub(spec, split, source)
    else:
        raw = read_file(spec.name, split, source)
    raw, first = sliced(spec.name, split, source.rows, raw)
    if spec.is_multiple_choice:
        rows, missing = choice_rows(spec, split, raw, first)
    else:
        rows, missing = _normalise(spec, split, raw, first, forms)
    check_skipped(spec, split, raw, len(rows), missing)
    skipped[split] = raw.skipped + len(missing)
    if skipped[split]:
        logger.warning(
            "task %r, %s: skipped %s of %s (%s)",
            spec.name,
            split,
            plural(skipped[split], "row"),
            raw.source,
            skip_places(raw, missing),
        )
    dropped = set(missing)
    numbers = [n for n in range(first, first + len(raw.rows)) if n not in dropped]
    return rows, numbers


def _normalise(
    spec: TaskSpec,
    split: str,
    raw: RawSplit,
    first: int = 1,
    forms: list[LabelForm | None] | None = None,
) -> tuple[list[tuple[Any, ...]], list[int]]:
    """Map rows to (texts..., label index, or a regression number), and the numbers of the
    rows dropped for a missing or empty value. (Multiple choice: `choices.choice_rows`.)"""
    wanted = [("text_fields", name) for name in spec.text_fields]
    wanted.append(("label_field", spec.label_field))
    for key, column in wanted:
        if column not in raw.columns:
            raise TaskError(
                spec.name,
                f"{split} column {column!r} ({key})",
                f"not found in {raw.source}{other_case(column, raw.columns)}",
                f"columns there: {', '.join(raw.columns) or '(none)'}; fix {key} or {split}.rename"
                + _separator_hint(raw.columns, split),
            )
    check_once(spec, split, raw, wanted)
    if spec.is_regression:
        labels: NumberLabel | LabelMap = NumberLabel(spec)
    else:
        labels = LabelMap(spec)
        cells = enumerate((r.get(spec.label_field) for r in raw.rows), start=first)
        form = labels.check_column(cells, split, raw.source)
        if forms is not None:
            forms.append(form)
    keys = [f"column {name!r} (text_fields)" for name in spec.text_fields]
    rows: list[tuple[Any, ...]] = []
    missing: list[int] = []
    for number, record in enumerate(raw.rows, start=first):
        where = RowRef(spec, split, raw.source, number)
        fields = zip(spec.text_fields, keys, strict=True)
        texts = [cell_text(record.get(name), key, where) for name, key in fields]
        label = record.get(spec.label_field)
        if is_blank(label) or None in texts:
            missing.append(number)
            continue
        rows.append((*texts, labels.index(label, split, number, raw.source)))
    return rows, missing


def _read_hub(spec: TaskSpec, split: str, source: SplitSource) -> RawSplit:
    import datasets

    assert spec.hub is not None and source.split is not None
    where = f"{spec.hub}" + (f" ({spec.hub_config})" if spec.hub_config else "")
    try:
        local = Path(spec.hub)
        saved = local.is_dir() and any(
            (local / marker).is_file() for marker in ("dataset_dict.json", "state.json")
        )
        if saved:
            loaded = datasets.load_from_disk(str(local))
        else:
            with cache_only_while_unreachable():
                loaded = datasets.load_dataset(spec.hub, spec.hub_config)
    except Exception as exc:  # any loader failure becomes one clear line before training
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if (why := hub_unreachable()) and not local.is_dir():
            first = f"{why}, and it is not in the datasets cache"
        raise TaskError(
            spec.name, "hub", f"cannot load {where}: {first}", "check hub/hub_config"
        ) from None
    if isinstance(loaded, datasets.Dataset):
        loaded = datasets.DatasetDict({"train": loaded})
    if source.split not in loaded:
        raise TaskError(
            spec.name,
            f"{split}.split",
            f"split {source.split!r} not in {where}",
            f"splits there: {', '.join(loaded)}",
        )
    table = loaded[source.split]
    raw = RawSplit(f"{where}[{source.split}]", list(table.column_names), table.to_list())
    return raw.renamed(spec.name, split, source.rename)


def _hold_out(spec: TaskSpec, rows: list) -> tuple[list, list]:
    assert spec.dev_fraction is not None
    n_dev = max(1, round(len(rows) * spec.dev_fraction))
    if n_dev >= len(rows):
        raise TaskError(spec.name, "dev_fraction", f"leaves no train rows of {len(rows)}")
    order = np.random.default_rng(spec.seed).permutation(len(rows))
    in_dev = np.zeros(len(rows), dtype=bool)
    in_dev[order[:n_dev]] = True
    train = [row for row, d in zip(rows, in_dev, strict=True) if not d]
    dev = [row for row, d in zip(rows, in_dev, strict=True) if d]
    return train, dev


def _subsample(rows: list, limit: int | None, seed: tuple[int, int]) -> list:
    if limit is None or limit >= len(rows):
        return rows
    keep = np.sort(np.random.default_rng(list(seed)).choice(len(rows), size=limit, replace=False))
    return [rows[i] for i in keep]


def _nonempty(spec: TaskSpec, split: str, rows: list, skipped: dict[str, int]) -> None:
    if not rows:
        source = getattr(spec.dev if split == "dev" else spec.train, "path", None) or spec.hub
        bad = skipped.get(split, 0)
        problem = f"split is empty ({source}" + (f", {plural(bad, 'row')} skipped)" if bad else ")")
        raise TaskError(spec.name, split, problem, "check the file, its columns and its split")


def _dataset(spec: TaskSpec, rows: list[tuple[Any, ...]]) -> datasets.Dataset:
    import datasets

    label = label_feature(spec)
    string = datasets.Value("string")
    if spec.is_multiple_choice:
        n = spec.num_labels
        data = {
            "question": [r[0] for r in rows],
            "choices": [list(r[1 : 1 + n]) for r in rows],
            "label": [r[-1] for r in rows],
        }
        features = {"question": string, "choices": datasets.List(string), "label": label}
    else:
        data = {"text_a": [r[0] for r in rows]}
        features = {"text_a": string}
        if spec.is_pair:
            data["text_b"] = [r[1] for r in rows]
            features["text_b"] = string
        data["label"] = [r[-1] for r in rows]
        features["label"] = label
    return datasets.Dataset.from_dict(data, features=datasets.Features(features))
