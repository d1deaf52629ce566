"""Fixtures for the whole-pipeline tests: the tiny world of the sweep tests, a local Ray."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tuning"))

from tuning_support import make_tiny_model  # noqa: E402


@pytest.fixture(scope="session")
def pipeline_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_model(tmp_path_factory.mktemp("tiny-bert") / "model")


@pytest.fixture(scope="session")
def ray_cluster() -> Iterator[None]:
    import ray

    if ray.is_initialized():
        yield
        return
    ray.init(address="local", num_cpus=2, include_dashboard=False)
    try:
        yield
    finally:
        ray.shutdown()
