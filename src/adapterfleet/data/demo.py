"""A small synthetic task suite: three source tasks and one low-resource target task.

All are shop reviews built from one vocabulary (`demo_text`). The sources teach sentiment
(``demo_sentiment``), which aspect a sentence is about (``demo_aspect``) and whether a statement is
negated, in sentences that may turn with a contrast (``demo_negation``); the target
(``demo_delivery``) asks whether the customer was satisfied with the delivery, in reviews that mix
aspects, contrasts and negations: it needs all three skills and has only 100 training examples.
"""

from __future__ import annotations

import csv
import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from adapterfleet.data.config_file import load_tasks_config
from adapterfleet.data.demo_text import ASPECTS, balanced, clause, sentence
from adapterfleet.data.tasks import TaskSpec

SOURCE_SIZES = (1500, 300)
TARGET_SIZES = (100, 300)
CONFIG_NAME = "tasks.yaml"

Example = tuple[str, str]  # (text, label)


def generate_demo_suite(directory: str | Path, seed: int = 0) -> dict[str, TaskSpec]:
    """Write the demo tasks' files and ``tasks.yaml`` into ``directory``; return their specs.

    Same seed, same bytes. Labels are balanced in every split; no text repeats within a task.
    """
    root = Path(directory)
    root.mkdir(parents=True, exist_ok=True)
    tasks = {
        "demo_sentiment": _sentiment_task(root, seed),
        "demo_aspect": _aspect_task(root, seed),
        "demo_negation": _negation_task(root, seed),
        "demo_delivery": _delivery_task(root, seed),
    }
    document = {"data_root": ".", "tasks": tasks}
    config = root / CONFIG_NAME
    config.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
    return load_tasks_config(config)


def _sentiment_task(root: Path, seed: int) -> dict[str, Any]:
    """A TSV with a header."""
    train, dev = _examples(seed, "sentiment", _sentiment, ("negative", "positive"), SOURCE_SIZES)
    _write_tsv(root / "sentiment_train.tsv", train)
    _write_tsv(root / "sentiment_dev.tsv", dev)
    return {
        "train": "sentiment_train.tsv",
        "dev": "sentiment_dev.tsv",
        "text_fields": ["review"],
        "label_field": "sentiment",
        "label_names": ["negative", "positive"],
    }


def _aspect_task(root: Path, seed: int) -> dict[str, Any]:
    """JSON lines, four classes."""
    train, dev = _examples(seed, "aspect", _aspect, ASPECTS, SOURCE_SIZES)
    _write_jsonl(root / "aspect_train.jsonl", train)
    _write_jsonl(root / "aspect_dev.jsonl", dev)
    return {
        "train": "aspect_train.jsonl",
        "dev": "aspect_dev.jsonl",
        "text_fields": ["sentence"],
        "label_field": "aspect",
        "label_names": list(ASPECTS),
    }


def _negation_task(root: Path, seed: int) -> dict[str, Any]:
    """A CSV without header (its columns declared), labels as class indices."""
    names = ("affirmed", "negated")
    train, dev = _examples(seed, "negation", _negation, names, SOURCE_SIZES)
    _write_headerless_csv(root / "negation_train.csv", train, names)
    _write_headerless_csv(root / "negation_dev.csv", dev, names)
    columns = ["id", "text", "negated"]
    splits = {
        split: {"path": f"negation_{split}.csv", "header": False, "columns": columns}
        for split in ("train", "dev")
    }
    return splits | {"text_fields": ["text"], "label_field": "negated", "label_names": list(names)}


def _delivery_task(root: Path, seed: int) -> dict[str, Any]:
    """The low-resource target: a JSON object of records, scored by accuracy and F1."""
    train, dev = _examples(seed, "delivery", _delivery, ("no", "yes"), TARGET_SIZES)
    _write_json_records(root / "delivery_train.json", train)
    _write_json_records(root / "delivery_dev.json", dev)
    return {
        "train": "delivery_train.json",
        "dev": "delivery_dev.json",
        "text_fields": ["review"],
        "label_field": "satisfied_with_delivery",
        "label_names": ["no", "yes"],
        "metrics": ["accuracy", "f1"],
    }


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


def _write_tsv(path: Path, rows: list[Example]) -> None:
    lines = ["review\tsentiment"] + [f"{text}\t{label}" for text, label in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _write_jsonl(path: Path, rows: list[Example]) -> None:
    lines = [json.dumps({"sentence": text, "aspect": label}) for text, label in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _write_headerless_csv(path: Path, rows: list[Example], names: tuple[str, ...]) -> None:
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        for number, (text, label) in enumerate(rows):
            writer.writerow([number, text, names.index(label)])


def _write_json_records(path: Path, rows: list[Example]) -> None:
    records = {
        str(i): {"review": text, "satisfied_with_delivery": label}
        for i, (text, label) in enumerate(rows)
    }
    path.write_text(json.dumps(records, indent=1) + "\n", encoding="utf-8")
