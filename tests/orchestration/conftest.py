"""The one-machine tests' config (`local_support.local_config`) in a folder of each module."""

from __future__ import annotations

from pathlib import Path

import pytest
from local_support import local_config

from adapterfleet.config import PipelineConfig


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("local")


@pytest.fixture(scope="module")
def config(root: Path, tiny_model: Path) -> PipelineConfig:
    return local_config(root, tiny_model)
