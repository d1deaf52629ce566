"""The sweep tests use the shared `tiny_model` and `ray_local` fixtures of tests/conftest.py."""
