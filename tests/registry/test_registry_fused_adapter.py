"""A fusion whose adapter version was deleted in the model registry (the MLflow UI's "Delete
version"): pulling it, as `pull --fusion` and `predict` do, names the fusion, the missing
adapter version, what is registered instead and the fix. It said `model p.adapter.rte has no
version 1 in ...`, without a word of the fusion that needed it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from mlflow import MlflowClient

from adapterfleet.registry import (
    RegistryError,
    adapter_model_name,
    fusion_model_name,
    open_trial_run,
    pull_folder,
    register_version,
)
from adapterfleet.registry.pulling import fused_adapter


def _logged(uri: str, experiment: str, folder: Path, artifact: str) -> tuple[str, Path]:
    run = open_trial_run(uri, experiment, None, folder.name)
    run.log_artifacts(folder, artifact)
    run.end()
    return run.run_id, folder / "adapter.safetensors"


def test_a_fusion_whose_adapter_version_was_deleted_names_it_and_the_fix(
    sqlite_uri: str,
    sqlite_experiment: str,
    make_adapter: Callable[..., Path],
    new_name: Callable[[str], str],
    tmp_path: Path,
) -> None:
    prefix = new_name("p")
    adapter = adapter_model_name(prefix, "rte")
    for seed in (0, 1):  # v1, then v2 (@best)
        run_id, weights = _logged(
            sqlite_uri, sqlite_experiment, make_adapter(tmp_path / f"a{seed}", seed), "adapter"
        )
        register_version(sqlite_uri, adapter, run_id, "adapter", weights, {})
    run_id, weights = _logged(
        sqlite_uri, sqlite_experiment, make_adapter(tmp_path / "f", 2), "fusion"
    )
    fusion = fusion_model_name(prefix, "rte")
    info = register_version(sqlite_uri, fusion, run_id, "fusion", weights, {"adapter.rte": "v1"})
    assert fused_adapter(sqlite_uri, info, adapter, 1).version == 1  # there, it is found
    MlflowClient(sqlite_uri, registry_uri=sqlite_uri).delete_model_version(adapter, "1")

    dest = tmp_path / "pulled"
    with pytest.raises(RegistryError) as refused:
        pull_folder(sqlite_uri, fusion, dest)
    assert str(refused.value) == (
        f"model {fusion} version 1 fuses {adapter} version 1, which is no longer registered in "
        f"{sqlite_uri} (its versions: v2 (@best)), so it cannot be pulled or used; run the "
        "pipeline again (or `adapterfleet fuse --wait`) to train a fusion over the adapters "
        "registered now"
    )
    assert not dest.exists()  # nothing half-pulled
