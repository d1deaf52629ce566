import os
from collections.abc import Iterator
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

GLUE_DIR = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "glue"


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A random 2-layer BERT with the packaged MiniLM tokenizer (tests/tuning_support.py)."""
    from tuning_support import make_tiny_model

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


@pytest.fixture(autouse=True)
def _tracking_uri_kept() -> Iterator[None]:
    """A test that leaves $MLFLOW_TRACKING_URI changed fails here: every later pipeline of the
    process (and of its pytest worker) would use that store instead of its own storage's.
    MLflow's `set_tracking_uri` sets the variable, and so do commands that call it (`mlflow
    gc`); `monkeypatch.setenv` is undone before this check."""
    before = os.environ.get("MLFLOW_TRACKING_URI")
    yield
    after = os.environ.get("MLFLOW_TRACKING_URI")
    if after != before:
        if before is None:
            os.environ.pop("MLFLOW_TRACKING_URI", None)
        else:
            os.environ["MLFLOW_TRACKING_URI"] = before
        pytest.fail(f"the test left MLFLOW_TRACKING_URI={after!r} (it was {before!r})")
