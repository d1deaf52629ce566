"""Length-grouped batch sampler, padding collator and make_dataloader."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from datatest_support import GLUE_CONFIG, needs_glue

from adapterfleet.data import (
    LengthGroupedBatchSampler,
    PadCollator,
    load_task,
    load_tasks_config,
    make_dataloader,
    padding_fraction,
    tokenize_task,
)

LENGTHS = np.random.default_rng(0).integers(5, 200, size=1000).tolist()


def _random_batches(n: int, size: int, seed: int = 0) -> list[list[int]]:
    order = np.random.default_rng(seed).permutation(n).tolist()
    return [order[i : i + size] for i in range(0, n, size)]


def test_sampler_is_deterministic_per_seed_and_epoch() -> None:
    def batches(seed: int, epoch: int) -> list[list[int]]:
        return list(LengthGroupedBatchSampler(LENGTHS, 16, shuffle=True, seed=seed, epoch=epoch))

    assert batches(0, 0) == batches(0, 0)
    assert batches(0, 0) != batches(0, 1) and batches(0, 0) != batches(1, 0)
    sampler = LengthGroupedBatchSampler(LENGTHS, 16, seed=0)
    sampler.set_epoch(1)
    assert list(sampler) == batches(0, 1)


def test_sampler_covers_every_index_once_and_groups_lengths() -> None:
    sampler = LengthGroupedBatchSampler(LENGTHS, 16, mega_batch_factor=10)
    batches = list(sampler)
    assert len(batches) == len(sampler) == 63
    assert sorted(i for b in batches for i in b) == list(range(1000))
    assert sum(len(b) < 16 for b in batches) == 1
    grouped = padding_fraction(LENGTHS, batches)
    assert grouped < 0.25 * padding_fraction(LENGTHS, _random_batches(1000, 16))
    assert batches != sorted(batches, key=lambda b: -max(LENGTHS[i] for i in b))  # order shuffled


def test_drop_last_and_eval_order() -> None:
    dropped = LengthGroupedBatchSampler(LENGTHS, 16, drop_last=True)
    assert len(dropped) == 62 == len(list(dropped)) and all(len(b) == 16 for b in dropped)
    evaluation = list(LengthGroupedBatchSampler(LENGTHS, 16, shuffle=False))
    flat = [i for b in evaluation for i in b]
    assert sorted(flat) == list(range(1000))
    assert [LENGTHS[i] for i in flat] == sorted(LENGTHS, reverse=True)
    in_order = LengthGroupedBatchSampler(LENGTHS, 16, shuffle=False, sort_by_length=False)
    assert [i for b in in_order for i in b] == list(range(1000))


def test_collate_pads_to_the_longest_in_the_batch() -> None:
    rows = [
        {"input_ids": [101, 7, 102], "token_type_ids": [0, 0, 0], "label": 1},
        {"input_ids": [101, 7, 8, 102, 9, 102], "token_type_ids": [0, 0, 0, 0, 1, 1], "label": 0},
    ]
    batch = PadCollator(pad_token_id=5)(rows)
    assert set(batch) == {"input_ids", "attention_mask", "token_type_ids", "labels"}
    assert batch["input_ids"].tolist() == [[101, 7, 102, 5, 5, 5], [101, 7, 8, 102, 9, 102]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1, 0, 0, 0], [1] * 6]
    assert batch["token_type_ids"].tolist() == [[0] * 6, [0, 0, 0, 0, 1, 1]]
    assert batch["labels"].tolist() == [1, 0] and batch["labels"].dtype == torch.long
    assert batch["input_ids"].dtype == torch.long
    plain = PadCollator(0)([{"input_ids": [1, 2], "label": 0}])
    assert set(plain) == {"input_ids", "attention_mask", "labels"}


def test_collate_pads_to_a_multiple_but_not_past_the_longest_row_of_the_split() -> None:
    rows = [{"input_ids": [1] * n, "label": 0} for n in (3, 9)]
    assert PadCollator(0, multiple_of=8)(rows)["input_ids"].shape == (2, 16)
    assert PadCollator(0, multiple_of=8, at_most=12)(rows)["input_ids"].shape == (2, 12)
    assert PadCollator(0, multiple_of=8, at_most=12)(rows[:1])["input_ids"].shape == (1, 8)
    rounded = PadCollator(0, multiple_of=8)(rows)
    assert rounded["attention_mask"].sum(1).tolist() == [3, 9]
    assert rounded["input_ids"][1, 9:].tolist() == [0] * 7


def test_collate_multiple_choice_gives_b_c_t() -> None:
    rows = [
        {"input_ids": [[1, 2], [1, 2, 3], [1]], "label": 2},
        {"input_ids": [[1], [1, 2, 3, 4], [1, 2]], "label": 0},
    ]
    batch = PadCollator(0)(rows)
    assert batch["input_ids"].shape == (2, 3, 4) == batch["attention_mask"].shape
    assert batch["attention_mask"][1, 1].tolist() == [1, 1, 1, 1]
    assert batch["attention_mask"][0, 2].tolist() == [1, 0, 0, 0]
    assert batch["labels"].shape == (2,)


def test_make_dataloader_on_a_tokenized_task(tmp_path: Path, write_config, tokenizer) -> None:
    lines = ["text\tlabel"] + [f"{'word ' * (1 + i % 17)}number {i}\t{i % 2}" for i in range(100)]
    (tmp_path / "t.tsv").write_text("\n".join(lines) + "\n")
    spec = {"train": "t.tsv", "dev": "t.tsv", "text_fields": "text", "label_names": [0, 1]}
    task = load_task(load_tasks_config(write_config({"t": spec}))["t"])
    split = tokenize_task(task, tokenizer, 64, tmp_path / "cache").train
    loader = make_dataloader(split, 8, shuffle=True, seed=3, pad_token_id=0)
    batches = list(loader)
    assert len(batches) == len(loader) == 13
    labels = torch.cat([b["labels"] for b in batches]).tolist()
    assert sorted(labels) == sorted(split.labels)
    for batch in batches:
        width = batch["input_ids"].shape[1]
        assert width == int(batch["attention_mask"].sum(1).max())  # padded to the longest
        assert batch["token_type_ids"].shape == batch["input_ids"].shape
    again = list(make_dataloader(split, 8, shuffle=True, seed=3, pad_token_id=0))
    pairs = zip(batches, again, strict=True)
    assert all(torch.equal(a["input_ids"], b["input_ids"]) for a, b in pairs)
    next_epoch = list(make_dataloader(split, 8, shuffle=True, seed=3, pad_token_id=0, epoch=1))
    assert [b["labels"].tolist() for b in next_epoch] != [b["labels"].tolist() for b in batches]
    evaluation = list(make_dataloader(split, 8, shuffle=False, seed=0, pad_token_id=0))
    widths = [b["input_ids"].shape[1] for b in evaluation]
    assert widths == sorted(widths, reverse=True)
    for_a_gpu = make_dataloader(split, 8, shuffle=False, seed=0, pad_token_id=0,
                                pad_to_multiple_of=8)  # fmt: skip
    rounded = {b["input_ids"].shape[1] for b in for_a_gpu}
    assert all(w % 8 == 0 or w == max(split.lengths) for w in rounded)
    assert len(rounded) < len(set(widths))


@needs_glue
def test_length_grouping_cuts_padding_on_rte(tmp_path: Path, tokenizer) -> None:
    task = load_task(load_tasks_config(GLUE_CONFIG)["rte"])
    split = tokenize_task(task, tokenizer, 256, tmp_path).train
    grouped = padding_fraction(split.lengths, list(LengthGroupedBatchSampler(split.lengths, 32)))
    random = padding_fraction(split.lengths, _random_batches(len(split), 32))
    assert random > 0.3  # RTE premises vary a lot in length
    assert grouped < 0.2 * random, (grouped, random)


def test_sampler_rejects_bad_sizes() -> None:
    with pytest.raises(ValueError, match="batch_size"):
        LengthGroupedBatchSampler(LENGTHS, 0)
