"""MT-A's steps: each batch trains its own task's adapter and head and no other's, so they stay
eager on a GPU (a replayed step keeps every gradient it made, and the optimizer would move
them all)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from helpers import tiny_encoder

from adapterfleet.config import ConfigError, load_config
from adapterfleet.data.cache import TokenizedSplit, TokenizedTask
from adapterfleet.training import TrainConfig
from adapterfleet.training.multitask import train_mt_a

ROOT = Path(__file__).resolve().parents[2]


def _task(name: str, seed: int) -> TokenizedTask:
    """Rows whose label is whether token 7 is in them."""
    generator = torch.Generator().manual_seed(seed)
    ids, labels = [], []
    for index in range(48):
        length = int(torch.randint(4, 20, (1,), generator=generator))
        row = torch.randint(8, 40, (length,), generator=generator)
        if index % 2:
            row[len(row) // 2] = 7
        ids.append([1, *row.tolist()])
        labels.append(index % 2)
    lengths = [len(row) for row in ids]
    split = TokenizedSplit(name, "train", Path(name), "", False, ids, None, labels, lengths)
    return TokenizedTask(name, ("no", "yes"), False, 32, 0, split, split)


def test_mt_a_refuses_cuda_graphs_true_in_the_config_and_in_the_library(tmp_path):
    with pytest.raises(ValueError, match="cuda_graphs: true cannot train MT-A: each batch"):
        train_mt_a({}, tiny_encoder(), TrainConfig(cuda_graphs=True), tmp_path)
    overrides = ["baselines.systems=[mt-a]", f"storage={tmp_path}"]
    for extra, field in [
        ("baselines.training.cuda_graphs=true", "baselines.training.cuda_graphs"),
        ("baselines.system_training.mt-a.cuda_graphs=true", "baselines.system_training.mt-a"),
    ]:
        with pytest.raises(ConfigError, match=f"^{field}.*set cuda_graphs: auto .MT-A then"):
            load_config(ROOT / "configs" / "demo.yaml", [*overrides, extra])
    # true for the other systems only is no error
    others = ["baselines.systems=[mt-a, st-a-houlsby]", f"storage={tmp_path}"]
    load_config(
        ROOT / "configs" / "demo.yaml",
        [*others, "baselines.system_training.st-a-houlsby.cuda_graphs=true"],
    )


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_mt_a_trains_eagerly_on_a_gpu_with_cuda_graphs_auto(tmp_path):
    tasks = {"x": _task("x", 1), "y": _task("y", 2)}
    config = TrainConfig(learning_rate=1e-3, max_epochs=2, batch_size=8, device="cuda")
    run = train_mt_a(tasks, tiny_encoder(), config, tmp_path)
    assert run.fit.epochs_run == 2
    assert all("cuda_graph_replays" not in h for h in run.fit.history)
