"""Registry tags that name paths cannot make a pull write or read outside its download folder;
folders registered beside a version (its head) are pulled only when their hash matches."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from mlflow import MlflowClient

from adapterfleet.registry import (
    RegistryError,
    adapter_model_name,
    get_version,
    open_trial_run,
    pull,
    pull_companion,
    register_version,
)
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


def test_a_companion_folder_is_pulled_only_when_its_hash_matches(
    sqlite_uri: str,
    sqlite_experiment: str,
    new_name: Callable[[str], str],
    make_adapter: Callable[..., Path],
    tmp_path: Path,
) -> None:
    write_adapter = make_adapter
    run = open_trial_run(sqlite_uri, sqlite_experiment, None, new_name("trial"))
    adapter = write_adapter(tmp_path / "adapter")
    head = write_adapter(tmp_path / "head", seed=1)  # any small safetensors folder will do
    run.log_artifacts(adapter, "adapter")
    run.log_artifacts(head, "head")
    run.end()
    name = adapter_model_name(new_name("companion"), "rte")
    weights = adapter / "adapter.safetensors"
    plain = register_version(sqlite_uri, name, run.run_id, "adapter", weights, {}, alias=None)
    with pytest.raises(RegistryError, match="records no hash for its head/ folder"):
        pull_companion(sqlite_uri, plain, "head", tmp_path / "none")

    other = adapter_model_name(new_name("companion"), "rte")
    info = register_version(
        sqlite_uri, other, run.run_id, "adapter", weights, {},
        companions={"head": head / "adapter.safetensors"},
    )  # fmt: skip
    pulled = pull_companion(sqlite_uri, info, "head", tmp_path / "got")
    assert (pulled / "adapter.safetensors").read_bytes() == (
        head / "adapter.safetensors"
    ).read_bytes()

    tag = next(k for k in info.tags if k.endswith(".head"))
    MlflowClient(sqlite_uri, registry_uri=sqlite_uri).set_model_version_tag(
        other, str(info.version), tag, "adapter.safetensors:" + "0" * 64
    )
    tampered = get_version(sqlite_uri, other, version=info.version)
    assert tampered is not None
    with pytest.raises(RegistryError, match="has sha256 .* but the registry recorded 0000"):
        pull_companion(sqlite_uri, tampered, "head", tmp_path / "bad")
    assert not (tmp_path / "bad").exists()
