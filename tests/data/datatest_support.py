"""Paths shared by the data layer's tests (a uniquely named module, importable from tests)."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
GLUE_DIR = REPO.parent / "shared" / "data" / "glue"
GLUE_CONFIG = REPO / "configs" / "glue.yaml"

needs_glue = pytest.mark.skipif(
    not (GLUE_DIR / "README.md").is_file(),
    reason=f"shared GLUE data not found at {GLUE_DIR} (it lives beside the repository)",
)
