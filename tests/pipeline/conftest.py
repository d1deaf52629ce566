"""The whole-pipeline tests use the tiny world of the sweep tests (tests/tuning_support.py)
and the shared `tiny_model` / `ray_local` fixtures of tests/conftest.py."""
