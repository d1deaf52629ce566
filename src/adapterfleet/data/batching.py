"""Length-grouped batches, dynamic padding, and the DataLoader built from them."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch.utils.data import DataLoader, Sampler

if TYPE_CHECKING:
    from adapterfleet.data.cache import TokenizedSplit

MEGA_BATCH_FACTOR = 50


class LengthGroupedBatchSampler(Sampler[list[int]]):
    """Batches of indices with similar lengths.

    shuffle=True: permute with (seed, epoch), cut into mega-batches of ``mega_batch_factor``
    batches, sort each by length (longest first), cut into batches, shuffle the batch order.
    shuffle=False: sorted by length, longest first (``sort_by_length``), else in order.
    """

    def __init__(
        self,
        lengths: Sequence[int],
        batch_size: int,
        shuffle: bool = True,
        seed: int = 0,
        epoch: int = 0,
        mega_batch_factor: int = MEGA_BATCH_FACTOR,
        drop_last: bool = False,
        sort_by_length: bool = True,
    ) -> None:
        if batch_size < 1 or mega_batch_factor < 1:
            raise ValueError("batch_size and mega_batch_factor must be >= 1")
        self.lengths = np.asarray(lengths, dtype=np.int64)
        self.batch_size = batch_size
        self.shuffle = shuffle
        self.seed = seed
        self.epoch = epoch
        self.mega_batch_factor = mega_batch_factor
        self.drop_last = drop_last
        self.sort_by_length = sort_by_length

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def batches(self) -> list[list[int]]:
        n, size = len(self.lengths), self.batch_size
        if not self.shuffle:
            order = np.arange(n)
            if self.sort_by_length:
                order = np.argsort(-self.lengths, kind="stable")
            batches = [order[i : i + size] for i in range(0, n, size)]
        else:
            rng = np.random.default_rng([self.seed, self.epoch])
            permutation = rng.permutation(n)
            mega = size * self.mega_batch_factor
            batches = []
            for start in range(0, n, mega):
                chunk = permutation[start : start + mega]
                chunk = chunk[np.argsort(-self.lengths[chunk], kind="stable")]
                batches += [chunk[i : i + size] for i in range(0, len(chunk), size)]
            batches = [batches[i] for i in rng.permutation(len(batches))]
        if self.drop_last:
            batches = [b for b in batches if len(b) == size]
        return [b.tolist() for b in batches]

    def __iter__(self) -> Iterator[list[int]]:
        return iter(self.batches())

    def __len__(self) -> int:
        n = len(self.lengths)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)


class PadCollator:
    """Pads a list of rows to the longest sequence in the batch (rounded up to `multiple_of`).

    Gives ``input_ids``, ``attention_mask``, ``token_type_ids`` (when rows have them) and
    ``labels`` (long class indices; float32 numbers for a regression task); shapes (B, T), or
    (B, C, T) for multiple choice rows.
    """

    def __init__(self, pad_token_id: int, multiple_of: int = 1, at_most: int | None = None) -> None:
        self.pad_token_id = pad_token_id
        self.multiple_of = multiple_of
        self.at_most = at_most

    def width(self, longest: int) -> int:
        """The padded width of a batch whose longest row is `longest`: rounded up to
        `multiple_of`, but never past `at_most` (the longest row of the split: the positions a
        base accepts) unless the batch itself is longer."""
        rounded = -(-longest // self.multiple_of) * self.multiple_of
        return max(longest, min(rounded, self.at_most)) if self.at_most else rounded

    def __call__(self, rows: Sequence[dict[str, Any]]) -> dict[str, torch.Tensor]:
        multiple_choice = bool(rows[0]["input_ids"]) and isinstance(rows[0]["input_ids"][0], list)
        seqs = [r["input_ids"] if multiple_choice else [r["input_ids"]] for r in rows]
        n_choices = len(seqs[0])
        width = self.width(max(len(s) for group in seqs for s in group))
        shape = (len(rows), n_choices, width)
        ids = np.full(shape, self.pad_token_id, dtype=np.int64)
        mask = np.zeros(shape, dtype=np.int64)
        has_types = "token_type_ids" in rows[0]
        types = np.zeros(shape, dtype=np.int64)
        for b, row in enumerate(rows):
            row_types = row.get("token_type_ids")
            if has_types and not multiple_choice:
                row_types = [row_types]
            for c, seq in enumerate(seqs[b]):
                ids[b, c, : len(seq)] = seq
                mask[b, c, : len(seq)] = 1
                if has_types:
                    types[b, c, : len(seq)] = row_types[c]
        squeeze = (lambda a: a) if multiple_choice else (lambda a: a[:, 0])
        out = {
            "input_ids": torch.from_numpy(squeeze(ids)),
            "attention_mask": torch.from_numpy(squeeze(mask)),
        }
        if has_types:
            out["token_type_ids"] = torch.from_numpy(squeeze(types))
        labels = [r["label"] for r in rows]
        numbers = isinstance(labels[0], float)  # a regression task's labels
        out["labels"] = torch.tensor(labels, dtype=torch.float32 if numbers else torch.long)
        return out


def make_dataloader(
    tokenized_split: TokenizedSplit,
    batch_size: int,
    shuffle: bool,
    seed: int,
    pad_token_id: int,
    epoch: int = 0,
    sort_eval_by_length: bool = True,
    drop_last: bool = False,
    pin_memory: bool = False,
    pad_to_multiple_of: int = 1,
) -> DataLoader:
    """A DataLoader over a `TokenizedSplit`: length-grouped batches (shuffled with seed+epoch
    when ``shuffle``, else longest first), padded per batch (to a multiple of
    ``pad_to_multiple_of``, within the split's longest row), num_workers 0; in pinned memory
    when ``pin_memory`` (batches bound for a GPU then copy without blocking)."""
    sampler = LengthGroupedBatchSampler(
        tokenized_split.lengths,
        batch_size,
        shuffle=shuffle,
        seed=seed,
        epoch=epoch,
        drop_last=drop_last,
        sort_by_length=sort_eval_by_length,
    )
    return DataLoader(
        tokenized_split,
        batch_sampler=sampler,
        collate_fn=PadCollator(
            pad_token_id, pad_to_multiple_of, max(tokenized_split.lengths, default=None)
        ),
        num_workers=0,
        pin_memory=pin_memory,
    )


def padding_fraction(lengths: Sequence[int], batches: Sequence[Sequence[int]]) -> float:
    """Share of padded positions when ``batches`` (index lists) are padded per batch."""
    lengths = np.asarray(lengths)
    real = sum(int(lengths[b].sum()) for b in batches if len(b))
    padded = sum(len(b) * int(lengths[b].max()) for b in batches if len(b))
    return 1.0 - real / padded if padded else 0.0
