"""A tiny frozen-base classifier and synthetic separable data, for the training tests (a module
of its own: a test file that imports `conftest` by name gets whichever conftest came first)."""

from __future__ import annotations

import torch
from torch import nn

Batches = list[dict[str, torch.Tensor]]


class TinyClassifier(nn.Module):
    """A frozen random projection (the "base") with a trainable LayerNorm + linear head.

    `decoy` requires grad but is never handed to `fit`: it must not change either.
    """

    def __init__(self, dim: int = 8, hidden: int = 32, dropout: float = 0.0) -> None:
        super().__init__()
        self.encoder = nn.Linear(dim, hidden).requires_grad_(False)
        self.decoy = nn.Parameter(torch.ones(hidden))
        self.norm = nn.LayerNorm(hidden)
        self.dropout = nn.Dropout(dropout)
        self.head = nn.Linear(hidden, 2)
        self.train_forwards = 0

    def forward(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        self.train_forwards += int(self.training)
        h = torch.tanh(self.encoder(batch["x"])) * self.decoy
        return self.head(self.dropout(self.norm(h)))

    def trainable(self) -> list[nn.Parameter]:
        return [*self.norm.parameters(), *self.head.parameters()]


def separable_data(n: int, seed: int, dim: int = 8) -> tuple[torch.Tensor, torch.Tensor]:
    """Points labelled by a fixed hyperplane, about 30 % positive, with a margin around it."""
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(n, dim, generator=generator)
    score = x @ torch.linspace(-1.0, 1.0, dim) - 1.0
    x = x + 0.5 * torch.sign(score)[:, None] * torch.linspace(-1.0, 1.0, dim) / 2
    return x, (score > 0).long()


def to_batches(x: torch.Tensor, y: torch.Tensor, batch_size: int) -> Batches:
    return [
        {"x": x[i : i + batch_size], "labels": y[i : i + batch_size]}
        for i in range(0, len(y), batch_size)
    ]
