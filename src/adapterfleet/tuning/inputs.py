"""The train and dev data of a job (a trial, a fusion, a baseline) as the run's MLflow dataset
inputs (`registry.datasets`): named `<task>-train` and `<task>-dev`, the file or hub split they
come from, and in their profile the rows the job used after `rows:`, `dev_fraction` and
`max_*_examples`, so a reader of a number knows how many rows it was made on.

No ray here: the trial, the fusion's and the baselines' training share it.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from adapterfleet._hashing import sha256_file
from adapterfleet.console import Say
from adapterfleet.data.cache import TokenizedTask
from adapterfleet.data.sources import SplitSource
from adapterfleet.data.tasks import TaskSpec
from adapterfleet.registry.datasets import EVAL, TRAIN, DatasetRecord, log_dataset_inputs
from adapterfleet.registry.runs import MlflowRunLogger
from adapterfleet.tuning.spec import combined_sha256

_DIGEST_CHARS = 16  # MLflow keeps at most 36


def log_task_inputs(
    logger: MlflowRunLogger, spec: TaskSpec, tokenized: TokenizedTask, say: Say = print
) -> None:
    """Log the task's train and dev splits, as `tokenized` holds them, as the run's inputs
    (once per run; a store that refuses them is said, not raised)."""
    try:
        records = task_inputs(spec, len(tokenized.train), len(tokenized.dev))
    except OSError as error:  # a file gone since it was read: the run goes on without
        say(f"could not describe the data of MLflow run {logger.run_id}: {error}")
        return
    log_dataset_inputs(logger, records, say)


def task_inputs(spec: TaskSpec, train_rows: int, dev_rows: int) -> list[DatasetRecord]:
    """The task's two splits as MLflow dataset records, with the rows each had. Each file is
    read once: its sha256 names it, and the two make the task's `data_sha256` as
    `tuning.spec.spec_data_sha256` composes it."""
    dev = spec.dev or spec.train  # no dev: `dev_fraction` of the train rows
    train_sha = _file_sha256(spec, spec.train)
    dev_sha = _file_sha256(spec, spec.dev) if spec.dev is not None else train_sha
    shas = [train_sha, dev_sha] if spec.dev is not None else [train_sha]
    data = None if None in shas else combined_sha256(shas)  # type: ignore[arg-type]
    train_limit, dev_limit = spec.max_train_examples, spec.max_dev_examples
    return [
        _record(spec, "train", spec.train, train_limit, train_rows, TRAIN, data, train_sha),
        _record(spec, "dev", dev, dev_limit, dev_rows, EVAL, data, dev_sha),
    ]


def _record(
    spec: TaskSpec,
    split: str,
    source: SplitSource,
    limit: int | None,
    rows: int,
    context: str,
    data: str | None,
    sha: str | None,
) -> DatasetRecord:
    """One split. Its digest covers the file's content (or the hub split) and how its rows were
    chosen: MLflow keeps one dataset per name and digest in an experiment, so a split cut
    otherwise must be another dataset, with its own row count."""
    chosen = _selection(spec, source, limit)
    identity = {"sha256": sha, "hub": [spec.hub, spec.hub_config], **chosen, "num_rows": rows}
    text = json.dumps(identity, sort_keys=True, default=str)
    digest = hashlib.sha256(text.encode()).hexdigest()[:_DIGEST_CHARS]
    if spec.hub is not None:
        where = {"path": spec.hub, "config_name": spec.hub_config, "split": source.split}
        source_type = "hugging_face"
    else:
        where, source_type = {"uri": str(source.path)}, "local"
    profile: dict[str, Any] = {"num_rows": rows, **_shown(chosen)}
    if sha is not None:
        profile.update(sha256=sha, data_sha256=data)  # data_sha256: as its versions' tag
    return DatasetRecord(
        f"{spec.name}-{split}", digest, source_type, json.dumps(where), context, profile
    )


def _selection(spec: TaskSpec, source: SplitSource, limit: int | None) -> dict[str, Any]:
    """How the split's rows were chosen from its source (how it is read included, not where
    it lies: a data folder moved elsewhere holds the same datasets)."""
    read = {k: v for k, v in source.to_mapping().items() if k != "path"}
    chosen: dict[str, Any] = {"read": read}
    if spec.dev is None:
        chosen["dev_fraction"] = spec.dev_fraction
    if limit is not None:
        chosen["max_examples"] = limit
    if spec.dev is None or limit is not None:
        chosen["seed"] = spec.seed  # it draws the rows
    return chosen


def _shown(chosen: dict[str, Any]) -> dict[str, Any]:
    """What the profile says of the selection: the `rows:` slice and the draws."""
    shown = {k: v for k, v in chosen.items() if k != "read"}
    rows = chosen["read"].get("rows")
    return {**({"rows": rows} if rows is not None else {}), **shown}


def _file_sha256(spec: TaskSpec, source: SplitSource) -> str | None:
    if spec.hub is not None or source.path is None or not Path(source.path).is_file():
        return None
    return sha256_file(source.path)
