"""The fit loop data-parallel over a real gloo group of two processes equals one process."""

from __future__ import annotations

import json

import pytest
import torch
import torch.multiprocessing as mp
from data_parallel_support import train_once
from safetensors.torch import load_file

from adapterfleet.training.distributed import DataParallel


def test_alone_a_rank_takes_the_whole_batch():
    batch = {"x": torch.ones(3, 2), "labels": torch.arange(3), "task": "rte"}
    rows, share = DataParallel().shard(batch)
    assert share == 1.0 and torch.equal(rows["labels"], torch.arange(3)) and rows["task"] == "rte"


def test_ranks_take_every_kth_row_and_their_share():
    batch = {"x": torch.arange(10).reshape(5, 2), "labels": torch.arange(5), "task": "rte"}
    first, share0 = DataParallel(0, 2).shard(batch)
    second, share1 = DataParallel(1, 2).shard(batch)
    assert first["labels"].tolist() == [0, 2, 4] and second["labels"].tolist() == [1, 3]
    assert second["x"].tolist() == [[2, 3], [6, 7]] and first["task"] == "rte"
    assert (share0, share1) == (3 / 5, 2 / 5)
    empty, share = DataParallel(2, 3).shard({"labels": torch.arange(2)})
    assert share == 0.0 and empty["labels"].numel() == 0


@pytest.mark.integration
def test_two_gloo_processes_train_what_one_process_trains(tmp_path):
    alone, pair = tmp_path / "alone", tmp_path / "pair"
    alone.mkdir(), pair.mkdir()
    train_once(alone)
    from data_parallel_support import rank_main

    mp.spawn(rank_main, args=(2, str(tmp_path / "store"), str(pair)), nprocs=2, join=True)
    one, two = load_file(str(alone / "w.st")), load_file(str(pair / "w.st"))
    assert one.keys() == two.keys()
    for key in one:
        torch.testing.assert_close(two[key], one[key], rtol=1e-5, atol=1e-6)
        assert not torch.equal(one[key], torch.zeros_like(one[key]))
    history_one = json.loads((alone / "history.json").read_text())
    history_two = json.loads((pair / "history.json").read_text())
    for a, b in zip(history_one, history_two, strict=True):
        assert a["dev_accuracy"] == b["dev_accuracy"]
        assert a["train_loss"] == pytest.approx(b["train_loss"], rel=1e-5)
