"""One rank of a data-parallel `fit` in a real gloo group, for test_training_distributed.py
(a module of its own so spawned processes can import it)."""

from __future__ import annotations

import json
from pathlib import Path

import torch
import torch.distributed as dist
from safetensors.torch import save_file
from torch import nn

from adapterfleet.training import TrainConfig, fit
from adapterfleet.training.distributed import DataParallel


class FrozenBaseClassifier(nn.Module):
    """A frozen random projection (the "base") under a trainable LayerNorm and linear head."""

    def __init__(self, dim: int = 8, hidden: int = 32) -> None:
        super().__init__()
        self.encoder = nn.Linear(dim, hidden).requires_grad_(False)
        self.norm = nn.LayerNorm(hidden)
        self.head = nn.Linear(hidden, 2)

    def forward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        return self.head(self.norm(torch.tanh(self.encoder(batch["x"]))))

    def trainable(self) -> list[nn.Parameter]:
        return [*self.norm.parameters(), *self.head.parameters()]


def tiny_problem(dim: int = 8, n: int = 61) -> tuple[list[dict[str, torch.Tensor]], list]:
    """Odd-sized batches of a separable task: the last train batch has one row."""
    generator = torch.Generator().manual_seed(3)
    x = torch.randn(n + 40, dim, generator=generator)
    y = (x @ torch.linspace(-1.0, 1.0, dim) > 0).long()
    train = [{"x": x[i : i + 15], "labels": y[i : i + 15]} for i in range(0, n, 15)]
    dev = [{"x": x[i : i + 9], "labels": y[i : i + 9]} for i in range(n, n + 40, 9)]
    return train, dev


def train_once(out: Path) -> None:
    """`fit` the tiny classifier (with an extra loss and gradient accumulation) and write its
    trained tensors and history (rank 0 only)."""
    torch.manual_seed(0)
    model = FrozenBaseClassifier()
    train, dev = tiny_problem()
    config = TrainConfig(
        learning_rate=0.05, max_epochs=3, device="cpu", grad_accum_steps=2, warmup_ratio=0.2
    )
    params = model.trainable()
    result = fit(
        model, params, train, dev, config, extra_loss=lambda: 0.1 * model.norm.weight.pow(2).sum()
    )
    if DataParallel.current().is_main:
        tensors = {str(i): p.detach().contiguous() for i, p in enumerate(params)}
        save_file(tensors, str(out / "w.st"))
        (out / "history.json").write_text(json.dumps(result.history))


def rank_main(rank: int, world_size: int, store: str, out: str) -> None:
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world_size)
    try:
        torch.set_num_threads(1)
        train_once(Path(out))
    finally:
        dist.destroy_process_group()
