"""The whole-pipeline tests use the tiny world of the sweep tests (tests/tuning/tuning_support.py)
and the shared `tiny_model` / `ray_local` fixtures of tests/conftest.py."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tuning"))
