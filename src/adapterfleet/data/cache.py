"""Tokenisation with a Parquet cache keyed by content, tokenizer, max_length and format version."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from adapterfleet._files import follow_umask
from adapterfleet.data.errors import TaskError
from adapterfleet.data.loading import TaskData

if TYPE_CHECKING:
    import datasets
    import pyarrow as pa
    from transformers import PreTrainedTokenizerBase

logger = logging.getLogger(__name__)
FORMAT_VERSION = 1
_META_KEY = b"adapterfleet"
_BATCH = 1000


@dataclass
class TokenizedSplit:
    """One tokenised split, indexable like a map-style dataset (rows are dicts)."""

    task: str
    split: str
    path: Path
    key: str
    from_cache: bool
    input_ids: list[Any]
    token_type_ids: list[Any] | None
    labels: list[Any]  # class indices, or numbers for a regression task
    lengths: list[int]

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int) -> dict[str, Any]:
        row = {
            "input_ids": self.input_ids[index],
            "label": self.labels[index],
            "length": self.lengths[index],
        }
        if self.token_type_ids is not None:
            row["token_type_ids"] = self.token_type_ids[index]
        return row


@dataclass
class TokenizedTask:
    """Both splits of a task, tokenised; ``from_cache`` is true when no split was re-tokenised."""

    name: str
    label_names: tuple[str, ...]
    is_multiple_choice: bool
    max_length: int
    pad_token_id: int
    train: TokenizedSplit
    dev: TokenizedSplit
    is_regression: bool = False
    value_range: tuple[float, float] | None = None  # a regression task's declared `range`
    pooling: str | None = None  # the task's `pooling`; None: the base family's own

    @property
    def from_cache(self) -> bool:
        return self.train.from_cache and self.dev.from_cache

    @property
    def num_labels(self) -> int:
        return len(self.label_names)

    @property
    def cut_share(self) -> float:
        """The share of training rows that reach `max_length` tokens: cut there (a row of
        exactly that length counts too, which is rare)."""
        lengths = self.train.lengths
        return sum(n >= self.max_length for n in lengths) / len(lengths) if lengths else 0.0


def tokenize_task(
    task_data: TaskData,
    tokenizer: PreTrainedTokenizerBase,
    max_length: int,
    cache_dir: str | Path,
) -> TokenizedTask:
    """Tokenise train and dev (pairs as pairs, "longest_first"; multiple choice as
    (question, choice) pairs) and cache each split as Parquet under ``cache_dir``; a later call
    with the same rows, tokenizer and max_length reads the files instead."""
    if max_length < 2:
        raise TaskError(task_data.name, "max_length", f"{max_length} is too small", "use >= 2")
    cache = Path(cache_dir)
    cache.mkdir(parents=True, exist_ok=True)
    tok_hash = tokenizer_fingerprint(tokenizer)
    splits = {
        name: _split(task_data, name, tokenizer, tok_hash, max_length, cache)
        for name in ("train", "dev")
    }
    pad = tokenizer.pad_token_id
    return TokenizedTask(
        name=task_data.name,
        label_names=task_data.label_names,
        is_multiple_choice=task_data.is_multiple_choice,
        max_length=max_length,
        pad_token_id=0 if pad is None else int(pad),
        train=splits["train"],
        dev=splits["dev"],
        is_regression=task_data.is_regression,
        value_range=task_data.spec.value_range,
        pooling=task_data.spec.pooling,
    )


def tokenizer_fingerprint(tokenizer: PreTrainedTokenizerBase) -> str:
    """sha256 of name_or_path, class and vocabulary; for fast tokenizers the vocabulary is taken
    with the whole pipeline definition (normaliser, added tokens, post-processor)."""
    digest = hashlib.sha256()
    head = {"name_or_path": str(tokenizer.name_or_path), "class": type(tokenizer).__name__}
    head["truncation_side"] = getattr(tokenizer, "truncation_side", None)
    digest.update(json.dumps(head, sort_keys=True).encode())
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        state = json.loads(backend.to_str())
        state.pop("truncation", None)  # call-time settings, changed by every tokenizer call
        state.pop("padding", None)
        digest.update(json.dumps(state, ensure_ascii=False).encode())
    else:
        vocab = sorted(tokenizer.get_vocab().items())
        digest.update("\n".join(f"{token}\t{index}" for token, index in vocab).encode())
    return digest.hexdigest()


def tokens_sha256(split: TokenizedSplit) -> str:
    """sha256 of a tokenised split's token ids and labels: the same rows at the same max_length
    give the same digest on any machine (the cache key also names the tokenizer's path)."""

    def plain(value: Any) -> Any:
        return value.tolist() if hasattr(value, "tolist") else str(value)

    text = json.dumps([split.input_ids, split.labels], default=plain, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def content_hash(dataset: datasets.Dataset) -> str:
    """sha256 of a normalised split's rows and features."""
    digest = hashlib.sha256()
    digest.update(json.dumps(dataset.features.to_dict(), sort_keys=True).encode())
    for name, values in dataset.to_dict().items():
        digest.update(name.encode())
        digest.update(json.dumps(values, ensure_ascii=False).encode())
    return digest.hexdigest()


def _split(
    task: TaskData,
    split: str,
    tokenizer: PreTrainedTokenizerBase,
    tok_hash: str,
    max_length: int,
    cache: Path,
) -> TokenizedSplit:
    dataset = task.split(split)
    key_parts = [f"v{FORMAT_VERSION}", content_hash(dataset), tok_hash, str(max_length)]
    key = hashlib.sha256("|".join(key_parts).encode()).hexdigest()
    path = cache / f"{task.name}-{split}-{key[:24]}.parquet"
    table = _read_cached(path, key, len(dataset))
    from_cache = table is not None
    if table is None:
        table = encode_rows(dataset, tokenizer, max_length, task.is_multiple_choice)
        meta = {"format_version": FORMAT_VERSION, "key": key, "task": task.name, "split": split}
        meta |= {"tokenizer": str(tokenizer.name_or_path), "max_length": max_length}
        table = table.replace_schema_metadata({_META_KEY: json.dumps(meta).encode()})
        _write_atomic(table, path)
    columns = table.column_names
    return TokenizedSplit(
        task=task.name,
        split=split,
        path=path,
        key=key,
        from_cache=from_cache,
        input_ids=table.column("input_ids").to_pylist(),
        token_type_ids=(
            table.column("token_type_ids").to_pylist() if "token_type_ids" in columns else None
        ),
        labels=table.column("label").to_pylist(),
        lengths=table.column("length").to_pylist(),
    )


def encode_rows(
    dataset: datasets.Dataset,
    tokenizer: PreTrainedTokenizerBase,
    max_length: int,
    multiple_choice: bool,
) -> pa.Table:
    """Token ids (and type ids) of every row, as training reads them; also used by prediction."""
    import pyarrow as pa

    ids: list[Any] = []
    types: list[Any] = []
    for start in range(0, len(dataset), _BATCH):
        batch = dataset[start : start + _BATCH]
        if multiple_choice:
            n_choices = len(batch["choices"][0])
            firsts = [q for q in batch["question"] for _ in range(n_choices)]
            seconds = [c for choices in batch["choices"] for c in choices]
            enc = tokenizer(firsts, seconds, truncation="longest_first", max_length=max_length)
            group = [range(i, i + n_choices) for i in range(0, len(firsts), n_choices)]
            ids += [[enc["input_ids"][j] for j in g] for g in group]
            if "token_type_ids" in enc:
                types += [[enc["token_type_ids"][j] for j in g] for g in group]
        else:
            second = batch.get("text_b")
            truncation = "longest_first" if second is not None else True
            enc = tokenizer(batch["text_a"], second, truncation=truncation, max_length=max_length)
            ids += enc["input_ids"]
            if "token_type_ids" in enc:
                types += enc["token_type_ids"]
    seq = pa.list_(pa.int32())
    row_type = pa.list_(seq) if multiple_choice else seq
    lengths = [max(len(s) for s in r) if multiple_choice else len(r) for r in ids]
    columns = {"input_ids": pa.array(ids, type=row_type)}
    if types:
        columns["token_type_ids"] = pa.array(types, type=row_type)
    numbers = dataset.features["label"].dtype.startswith("float")  # a regression task
    label_type = pa.float64() if numbers else pa.int64()
    columns["label"] = pa.array(dataset.to_dict()["label"], type=label_type)
    columns["length"] = pa.array(lengths, type=pa.int32())
    return pa.table(columns)


def _read_cached(path: Path, key: str, rows: int) -> pa.Table | None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    if not path.is_file():
        return None
    try:
        table = pq.read_table(path)
        meta = json.loads((table.schema.metadata or {}).get(_META_KEY, b"{}"))
    except (pa.ArrowException, OSError, ValueError) as exc:
        logger.warning("cache file %s is unreadable (%s); tokenising again", path, exc)
        return None
    if meta.get("key") != key or table.num_rows != rows:
        logger.warning("cache file %s does not match its key; tokenising again", path)
        return None
    return table


def _write_atomic(table: pa.Table, path: Path) -> None:
    """Write to a temporary file in the same folder, fsync, then rename over ``path``."""
    import pyarrow.parquet as pq

    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            pq.write_table(table, handle)
            handle.flush()
            os.fsync(handle.fileno())
        follow_umask(tmp)  # mkstemp made it 0600
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
