"""A tiny frozen-base classifier and synthetic separable data for the training tests."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from tiny_classifier import Batches, TinyClassifier, separable_data, to_batches


@pytest.fixture
def make_model() -> Callable[..., TinyClassifier]:
    def make(seed: int = 0, **kwargs: float) -> TinyClassifier:
        torch.manual_seed(seed)
        return TinyClassifier(**kwargs)

    return make


@pytest.fixture
def task() -> dict[str, Batches | torch.Tensor]:
    """Train (256) and dev (128) batches of the separable task, plus the raw dev labels."""
    x_train, y_train = separable_data(256, seed=1)
    x_dev, y_dev = separable_data(128, seed=2)
    return {
        "train": to_batches(x_train, y_train, 16),
        "dev": to_batches(x_dev, y_dev, 64),
        "dev_labels": y_dev,
        "x_train": x_train,
        "y_train": y_train,
    }


@pytest.fixture
def shuffled_train(task: dict) -> Callable[[int], Batches]:
    """A per-epoch reshuffling train source, as length-grouped samplers provide."""

    def batches(epoch: int) -> Batches:
        order = torch.randperm(256, generator=torch.Generator().manual_seed(100 + epoch))
        return to_batches(task["x_train"][order], task["y_train"][order], 16)

    return batches
