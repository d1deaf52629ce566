"""tokenize_task: Parquet cache files, reuse, keys, atomic writes, pairs and multiple choice."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from adapterfleet.data import TaskError, load_task, load_tasks_config, tokenize_task
from adapterfleet.data.cache import _write_atomic, tokenizer_fingerprint

LONG = "the quick brown fox jumps over the lazy dog again and again " * 4


def _pair_task(tmp_path: Path, write_config, train_rows: list[tuple[str, str, int]]) -> Any:
    lines = ["a\tb\tlabel"] + [f"{a}\t{b}\t{y}" for a, b, y in train_rows]
    (tmp_path / "train.tsv").write_text("\n".join(lines) + "\n")
    (tmp_path / "dev.tsv").write_text("a\tb\tlabel\nshort one\tanother\t0\n")
    spec = {"train": "train.tsv", "dev": "dev.tsv", "text_fields": ["a", "b"]}
    spec["label_names"] = [0, 1]
    return load_task(load_tasks_config(write_config({"pairs": spec}))["pairs"])


ROWS = [(LONG, "a dog", 1), ("hello world", "hi there", 0), ("one", "two", 1)]


def test_tokenizes_pairs_and_reuses_the_cache(tmp_path: Path, write_config, tokenizer) -> None:
    task = _pair_task(tmp_path, write_config, ROWS)
    cache = tmp_path / "cache"
    first = tokenize_task(task, tokenizer, 16, cache)
    assert not first.from_cache and not first.train.from_cache
    files = sorted(p.name for p in cache.iterdir())
    assert len(files) == 2 and all(f.endswith(".parquet") for f in files)  # no temp files left
    table = pq.read_table(first.train.path)
    assert table.column_names == ["input_ids", "token_type_ids", "label", "length"]

    expected = tokenizer(LONG, "a dog", truncation="longest_first", max_length=16)
    assert first.train.input_ids[0] == expected["input_ids"]
    assert len(expected["input_ids"]) == 16  # the long first text was cut, the pair kept
    assert tokenizer.decode(first.train.input_ids[0]).endswith("[SEP] a dog [SEP]")
    assert first.train.token_type_ids[0] == expected["token_type_ids"]
    assert first.train.labels == [1, 0, 1] and first.train.lengths[1] == len(
        tokenizer("hello world", "hi there")["input_ids"]
    )
    row = first.train[1]
    assert set(row) == {"input_ids", "token_type_ids", "label", "length"}

    mtime = first.train.path.stat().st_mtime_ns
    second = tokenize_task(task, tokenizer, 16, cache)
    assert second.from_cache and second.train.path == first.train.path
    assert second.train.input_ids == first.train.input_ids
    assert second.train.token_type_ids == first.train.token_type_ids
    assert second.train.path.stat().st_mtime_ns == mtime


def test_key_depends_on_max_length_and_content(tmp_path: Path, write_config, tokenizer) -> None:
    cache = tmp_path / "cache"
    task = _pair_task(tmp_path, write_config, ROWS)
    base = tokenize_task(task, tokenizer, 16, cache)
    longer = tokenize_task(task, tokenizer, 32, cache)
    assert not longer.from_cache and longer.train.key != base.train.key
    assert len(longer.train.input_ids[0]) == 32
    changed = _pair_task(tmp_path, write_config, [*ROWS[:2], ("one", "three", 1)])
    again = tokenize_task(changed, tokenizer, 16, cache)
    assert not again.train.from_cache and again.train.key != base.train.key
    assert again.dev.from_cache  # the dev split did not change


def test_tokenizer_fingerprint(tokenizer) -> None:
    before = tokenizer_fingerprint(tokenizer)
    tokenizer(["a b c"] * 2, ["d"] * 2, truncation="longest_first", max_length=5, padding=True)
    assert tokenizer_fingerprint(tokenizer) == before  # call-time settings do not count
    other = copy.deepcopy(tokenizer)
    other.add_tokens(["zzyzxword"])
    assert tokenizer_fingerprint(other) != before


def test_corrupt_cache_file_is_rebuilt(tmp_path: Path, write_config, tokenizer) -> None:
    task = _pair_task(tmp_path, write_config, ROWS)
    first = tokenize_task(task, tokenizer, 16, tmp_path / "c")
    data = first.train.path.read_bytes()
    first.train.path.write_bytes(data[: len(data) // 2])
    rebuilt = tokenize_task(task, tokenizer, 16, tmp_path / "c")
    assert not rebuilt.train.from_cache and rebuilt.dev.from_cache
    assert rebuilt.train.input_ids == first.train.input_ids
    assert tokenize_task(task, tokenizer, 16, tmp_path / "c").from_cache


def test_failed_write_leaves_no_file(tmp_path: Path) -> None:
    target = tmp_path / "x.parquet"
    good = pa.table({"x": [1, 2]})
    _write_atomic(good, target)
    interval = pa.month_day_nano_interval()
    bad = pa.table({"x": pa.array([(1, 2, 3)], interval)})  # Parquet cannot store this type
    with pytest.raises(pa.ArrowNotImplementedError):
        _write_atomic(bad, target)
    assert [p.name for p in tmp_path.iterdir()] == ["x.parquet"]  # temp file removed
    assert pq.read_table(target).equals(good)  # the old file is intact


def test_single_sentences_and_max_length_check(tmp_path: Path, write_config, tokenizer) -> None:
    (tmp_path / "s.tsv").write_text(f"s\tlabel\n{LONG}\t1\nfine\t0\n")
    spec = {"train": "s.tsv", "dev": "s.tsv", "text_fields": "s", "label_names": [0, 1]}
    task = load_task(load_tasks_config(write_config({"single": spec}))["single"])
    out = tokenize_task(task, tokenizer, 8, tmp_path / "c")
    assert out.train.input_ids[1] == tokenizer("fine")["input_ids"]
    assert len(out.train.input_ids[0]) == 8 and out.train.lengths == [8, 3]
    assert set(out.train.token_type_ids[0]) == {0}
    with pytest.raises(TaskError, match="task 'single', max_length"):
        tokenize_task(task, tokenizer, 1, tmp_path / "c")


def test_multiple_choice_rows_hold_one_sequence_per_choice(
    tmp_path: Path, write_config, tokenizer
) -> None:
    rows = [
        {"q": "The sky is", "c0": "blue", "c1": "a large fish", "c2": "loud", "y": 0},
        {"q": "Fire is very", "c0": "cold", "c1": "hot", "c2": "wet", "y": 1},
    ]
    (tmp_path / "mc.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    spec = {
        "type": "multiple_choice",
        "train": "mc.jsonl",
        "dev": "mc.jsonl",
        "question_field": "q",
        "choice_fields": ["c0", "c1", "c2"],
        "label_field": "y",
    }
    task = load_task(load_tasks_config(write_config({"mc": spec}))["mc"])
    out = tokenize_task(task, tokenizer, 32, tmp_path / "c")
    assert out.is_multiple_choice and len(out.train) == 2
    assert len(out.train.input_ids[0]) == 3
    assert out.train.input_ids[0][1] == tokenizer("The sky is", "a large fish")["input_ids"]
    assert out.train.lengths[0] == max(len(s) for s in out.train.input_ids[0])
    assert (
        tokenize_task(task, tokenizer, 32, tmp_path / "c").train.input_ids[1][2]
        == (tokenizer("Fire is very", "wet")["input_ids"])
    )


def test_the_share_of_rows_cut_at_max_length_is_said(tmp_path, write_config, tokenizer) -> None:
    from adapterfleet.tuning.sweep import cut_note

    task = _pair_task(tmp_path, write_config, ROWS)
    cut = tokenize_task(task, tokenizer, 16, tmp_path / "cache")
    assert cut.cut_share == pytest.approx(1 / 3)  # the LONG row
    assert cut_note(cut) == (
        "; 33% of the training rows are cut at max_length 16 (a larger max_length keeps their "
        "ends, at more time per step)"
    )
    whole = tokenize_task(task, tokenizer, 64, tmp_path / "cache")
    assert whole.cut_share == 0 and cut_note(whole) == ""
