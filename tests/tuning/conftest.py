"""Fixtures for the sweep tests: a tiny random encoder, a local Ray started once per session."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from tuning_support import make_tiny_model  # noqa: E402


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_model(tmp_path_factory.mktemp("tiny-bert") / "model")


@pytest.fixture(scope="session")
def ray_local() -> Iterator[None]:
    """A local Ray of 2 CPUs (never one found on the machine), shut down at the end."""
    import ray

    if ray.is_initialized():
        yield
        return
    ray.init(address="local", num_cpus=2, include_dashboard=False)
    try:
        yield
    finally:
        ray.shutdown()
