"""A small synthetic task suite: three source tasks and one low-resource target task.

All are shop reviews built from one vocabulary (`demo_text`). The sources teach sentiment
(``demo_sentiment``), which aspect a sentence is about (``demo_aspect``) and whether a statement is
negated, in sentences that may turn with a contrast (``demo_negation``); the target
(``demo_delivery``) asks whether the customer was satisfied with the delivery, in reviews that mix
aspects, contrasts and negations: it needs all three skills and has a fifth of a source's
training examples (300).
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import os
import random
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import yaml

from adapterfleet.data.config_file import load_tasks_config, tasks_from_mapping
from adapterfleet.data.demo_text import ASPECTS, balanced, clause, sentence
from adapterfleet.data.errors import TaskError
from adapterfleet.data.tasks import TaskSpec

SOURCE_SIZES = (1500, 300)
TARGET_SIZES = (300, 300)
CONFIG_NAME = "tasks.yaml"
NEGATION_LABELS = ("affirmed", "negated")

Example = tuple[str, str]  # (text, label)
_written: set[tuple[Path, int]] = set()  # (folder, seed) this process has written


def generate_demo_suite(directory: str | Path, seed: int = 0) -> dict[str, TaskSpec]:
    """Write the demo tasks' files and ``tasks.yaml`` into ``directory``; return their specs.

    Same seed, same bytes. Labels are balanced in every split; no text repeats within a task.
    """
    root = Path(directory)
    _write_changed(root, _suite_files(seed))
    return load_tasks_config(root / CONFIG_NAME)


def demo_suite_specs(
    directory: str | Path, seed: int = 0, overrides: Mapping[str, Any] | None = None
) -> dict[str, TaskSpec]:
    """The demo tasks, their files in ``directory``, with nothing written: each spec carries
    ``demo_seed`` and `load_task` writes the suite (`ensure_demo_files`) before it reads one.
    So a config with ``demo_tasks: true`` writes nothing when it loads (a read-only command
    never does), and its specs, config hashes included, are those `generate_demo_suite` gives
    (`overrides` as `tasks_from_mapping` takes them: `{"tasks": {name: {key: value}}}`).
    """
    where = f"demo tasks in {directory}"
    specs = tasks_from_mapping(_document(), Path(directory), overrides, where=where)
    return {name: dataclasses.replace(spec, demo_seed=seed) for name, spec in specs.items()}


def ensure_demo_files(spec: TaskSpec) -> None:
    """Write the demo suite a demo task's files belong to (its folder, its seed), once per
    process while they are there: a file whose bytes are right already is left alone, any
    other replaced whole (another process reading it sees the old file or the new one)."""
    assert spec.demo_seed is not None and spec.train.path is not None
    key = (spec.train.path.parent, spec.demo_seed)
    if key in _written and spec.train.path.is_file():
        return
    try:
        _write_changed(key[0], _suite_files(key[1]))
    except OSError as error:
        problem = f"cannot write the demo data to {key[0]} ({error.strerror or error})"
        raise TaskError(spec.name, "demo_tasks", problem, "check storage") from None
    _written.add(key)


def _document() -> dict[str, Any]:
    """``tasks.yaml`` of the suite: four tasks in four formats."""
    negation_columns = ["id", "text", "negated"]  # one list: YAML writes it once, as an anchor
    negation = {
        split: {"path": f"negation_{split}.csv", "header": False, "columns": negation_columns}
        for split in ("train", "dev")
    }
    tasks = {
        "demo_sentiment": {  # a TSV with a header
            "train": "sentiment_train.tsv",
            "dev": "sentiment_dev.tsv",
            "text_fields": ["review"],
            "label_field": "sentiment",
            "label_names": ["negative", "positive"],
        },
        "demo_aspect": {  # JSON lines, four classes
            "train": "aspect_train.jsonl",
            "dev": "aspect_dev.jsonl",
            "text_fields": ["sentence"],
            "label_field": "aspect",
            "label_names": list(ASPECTS),
        },
        # A CSV without header (its columns declared), labels as class indices.
        "demo_negation": negation
        | {"text_fields": ["text"], "label_field": "negated", "label_names": list(NEGATION_LABELS)},
        "demo_delivery": {  # the low-resource target: a JSON object of records, accuracy and F1
            "train": "delivery_train.json",
            "dev": "delivery_dev.json",
            "text_fields": ["review"],
            "label_field": "satisfied_with_delivery",
            "label_names": ["no", "yes"],
            "metrics": ["accuracy", "f1"],
        },
    }
    return {"data_root": ".", "tasks": tasks}


def _suite_files(seed: int) -> dict[str, str]:
    """The text of every file of the suite, by name."""
    sentiment = _examples(seed, "sentiment", _sentiment, ("negative", "positive"), SOURCE_SIZES)
    aspect = _examples(seed, "aspect", _aspect, ASPECTS, SOURCE_SIZES)
    negation = _examples(seed, "negation", _negation, NEGATION_LABELS, SOURCE_SIZES)
    delivery = _examples(seed, "delivery", _delivery, ("no", "yes"), TARGET_SIZES)
    files = {}
    for index, split in enumerate(("train", "dev")):
        files[f"sentiment_{split}.tsv"] = _tsv(sentiment[index])
        files[f"aspect_{split}.jsonl"] = _jsonl(aspect[index])
        files[f"negation_{split}.csv"] = _headerless_csv(negation[index], NEGATION_LABELS)
        files[f"delivery_{split}.json"] = _json_records(delivery[index])
    files[CONFIG_NAME] = yaml.safe_dump(_document(), sort_keys=False)
    return files


def _write_changed(root: Path, files: dict[str, str]) -> None:
    """Write each file whose bytes differ from what ``root`` holds, through a temporary file
    renamed over it."""
    root.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        path, data = root / name, text.encode("utf-8")
        if path.is_file() and path.read_bytes() == data:
            continue
        temporary = root / f".{name}.{os.getpid()}.tmp"
        temporary.write_bytes(data)
        os.replace(temporary, path)


def _examples(
    seed: int,
    task: str,
    make: Callable[[random.Random, str], str],
    labels: tuple[str, ...],
    sizes: tuple[int, int],
) -> tuple[list[Example], list[Example]]:
    rng = random.Random(f"adapterfleet-demo:{seed}:{task}")
    seen: set[str] = set()
    splits = []
    for size in sizes:
        rows = []
        for label in balanced(rng, labels, size):
            text = make(rng, label)
            for _ in range(50):
                if text not in seen:
                    break
                text = make(rng, label)
            seen.add(text)
            rows.append((text, label))
        splits.append(rows)
    return splits[0], splits[1]


def _sentiment(rng: random.Random, label: str) -> str:
    positive = label == "positive"
    aspects = rng.sample(ASPECTS, rng.choice((1, 1, 2)))
    parts = [clause(rng, a, positive, rng.random() < 0.3) for a in aspects]
    return sentence(rng, parts, [False] * (len(parts) - 1))


def _aspect(rng: random.Random, label: str) -> str:
    return sentence(rng, [clause(rng, label, rng.random() < 0.5, rng.random() < 0.3)], [])


def _negation(rng: random.Random, label: str) -> str:
    """One or two clauses (joined by a contrast when their meanings differ); label: is any
    clause negated."""
    aspects = rng.sample(ASPECTS, rng.choice((1, 2)))
    is_negated = label == "negated"
    negated = [is_negated] + [is_negated and rng.random() < 0.5 for _ in aspects[1:]]
    rng.shuffle(negated)
    polarity = [rng.random() < 0.5 for _ in aspects]
    parts = [clause(rng, a, p, n) for a, p, n in zip(aspects, polarity, negated, strict=True)]
    return sentence(rng, parts, [polarity[0] != p for p in polarity[1:]])


def _delivery(rng: random.Random, label: str) -> str:
    satisfied = label == "yes"
    others = rng.sample([a for a in ASPECTS if a != "delivery"], rng.choice((1, 1, 2)))
    # The rest of a review leans the same way as the delivery clause two times in three, so the
    # overall tone is a weak cue and the target is learnable, if only partly, from its own data.
    polarity = {a: satisfied if rng.random() < 2 / 3 else not satisfied for a in others}
    polarity["delivery"] = satisfied
    order = ["delivery", *others]
    rng.shuffle(order)
    parts = [clause(rng, a, polarity[a], rng.random() < 0.3) for a in order]
    turns = [polarity[a] != polarity[b] for a, b in zip(order, order[1:], strict=False)]
    return sentence(rng, parts, turns)


def _tsv(rows: list[Example]) -> str:
    lines = ["review\tsentiment"] + [f"{text}\t{label}" for text, label in rows]
    return "\n".join(lines) + "\n"


def _jsonl(rows: list[Example]) -> str:
    lines = [json.dumps({"sentence": text, "aspect": label}) for text, label in rows]
    return "\n".join(lines) + "\n"


def _headerless_csv(rows: list[Example], names: tuple[str, ...]) -> str:
    handle = io.StringIO()
    writer = csv.writer(handle, lineterminator="\n")
    for number, (text, label) in enumerate(rows):
        writer.writerow([number, text, names.index(label)])
    return handle.getvalue()


def _json_records(rows: list[Example]) -> str:
    records = {
        str(i): {"review": text, "satisfied_with_delivery": label}
        for i, (text, label) in enumerate(rows)
    }
    return json.dumps(records, indent=1) + "\n"
