"""Registry tags that name paths cannot make a pull write or read outside its download folder."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from mlflow import MlflowClient

from adapterfleet.registry import RegistryError, adapter_model_name, pull, register_version
from adapterfleet.registry.tags import TAG_ARTIFACT_PATH, TAG_WEIGHTS_FILE

LoggedAdapter = Callable[..., tuple[str, Path]]


@pytest.mark.parametrize(
    ("tag", "value"),
    [
        (TAG_ARTIFACT_PATH, "../../outside"),
        (TAG_ARTIFACT_PATH, "/tmp/outside"),
        (TAG_WEIGHTS_FILE, "../adapter.safetensors"),
        (TAG_WEIGHTS_FILE, "sub/adapter.safetensors"),
    ],
)
def test_pull_refuses_a_tag_that_points_outside(
    sqlite_uri: str,
    sqlite_experiment: str,
    logged_adapter: LoggedAdapter,
    new_name: Callable[[str], str],
    tmp_path: Path,
    tag: str,
    value: str,
) -> None:
    run_id, weights = logged_adapter(sqlite_uri, sqlite_experiment)
    name = adapter_model_name(new_name("paths"), "rte")
    version = register_version(sqlite_uri, name, run_id, "adapter", weights, {})
    assert pull(sqlite_uri, name, tmp_path / "good").joinpath(weights.name).is_file()

    MlflowClient(sqlite_uri, registry_uri=sqlite_uri).set_model_version_tag(
        name, str(version.version), tag, value
    )
    area = tmp_path / "area"
    area.mkdir()
    with pytest.raises(RegistryError, match="would leave the download folder") as caught:
        pull(sqlite_uri, name, area / "dest")
    assert repr(value) in str(caught.value)
    assert list(area.iterdir()) == []  # nothing written, not even the staging folder
