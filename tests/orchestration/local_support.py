"""The pipeline config of the one-machine tests (`train`, `fuse`, `evaluate` as functions): a
tiny random BERT, the generated fruit and water tasks, `fruit4` (the fruit sentences declared
with four labels: a two-label head does not score them) and `score` (a regression task)."""

from __future__ import annotations

from pathlib import Path

import yaml
from tuning_support import write_tasks

from adapterfleet.config import PipelineConfig, load_config

FAST = {"learning_rate": 1e-2, "max_epochs": 1, "batch_size": 16}


def local_config(root: Path, model: Path) -> PipelineConfig:
    data = root / "data"
    tasks = write_tasks(data, train=32, dev=16)
    four = {**tasks["fruit"], "label_names": ["no", "yes", "maybe", "unsure"]}
    document = {
        "name": "evaluate",
        "base_model": str(model),
        "max_length": 24,
        "storage": str(root / "runs"),
        "data_root": str(data),
        "tasks": {**tasks, "fruit4": four, "score": _regression_task(data)},
        "adapters": {
            "tasks": ["fruit", "water"],
            "reduction_factors": [4],
            "learning_rates": [0.01],
            "seeds": [0],
            "training": {**FAST, "device": "cpu"},
        },
        "fusion": {"training": {**FAST, "device": "cpu"}},
    }
    (root / "pipeline.yaml").write_text(yaml.safe_dump(document))
    return load_config(root / "pipeline.yaml")


def _regression_task(data: Path) -> dict:
    """`score`: the fruit sentences scored 1.0 (about fruit) or 0.0, as a regression task."""
    for split in ("train", "dev"):
        rows = (data / f"fruit_{split}.tsv").read_text().splitlines()[1:]
        scored = [f"{text}\t{1.0 if label == 'yes' else 0.0}" for text, label in
                  (row.split("\t") for row in rows)]  # fmt: skip
        (data / f"score_{split}.tsv").write_text("\n".join(["text\tscore", *scored]) + "\n")
    return {"type": "regression", "train": "score_train.tsv", "dev": "score_dev.tsv",
            "text_fields": ["text"], "label_field": "score", "range": [0, 1]}  # fmt: skip
