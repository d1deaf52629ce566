"""cluster.yaml against the schema Ray ships, plus the settings the project relies on."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import ray.autoscaler
import yaml
from ray.autoscaler._private.util import prepare_config, validate_config

CLUSTER_YAML = Path(__file__).resolve().parents[2] / "cluster.yaml"
SCHEMA = Path(ray.autoscaler.__file__).parent / "ray-schema.json"


@pytest.fixture(scope="module")
def cluster() -> dict[str, Any]:
    return yaml.safe_load(CLUSTER_YAML.read_text())


def check(config: dict[str, Any]) -> None:
    """Ray's JSON schema, then what the schema cannot say."""
    jsonschema.validate(config, json.loads(SCHEMA.read_text()))
    types = config["available_node_types"]
    if config["head_node_type"] not in types:
        raise ValueError(f"head_node_type {config['head_node_type']!r} is not a node type")
    for name, node in types.items():
        for key, value in node["resources"].items():
            if type(value) is not int:
                raise ValueError(f"{name}.resources.{key} = {value!r} is not an integer")


def test_cluster_yaml_is_valid(cluster: dict[str, Any]) -> None:
    check(cluster)
    # What `ray up` does with it: merge the AWS defaults, then Ray's own validation.
    validate_config(prepare_config(copy.deepcopy(cluster)))


def test_gpu_cluster_settings(cluster: dict[str, Any]) -> None:
    assert cluster["provider"]["type"] == "aws"
    types = cluster["available_node_types"]
    head = types[cluster["head_node_type"]]
    assert head["resources"].get("GPU", 0) == 0
    gpu_workers = [n for n in types.values() if n["resources"].get("GPU", 0) >= 1]
    assert gpu_workers and all(n["max_workers"] > n.get("min_workers", 0) for n in gpu_workers)
    assert "g5" in gpu_workers[0]["node_config"]["InstanceType"]
    setup = cluster["setup_commands"]
    torch = next(i for i, c in enumerate(setup) if "install" in c and "torch" in c)
    project = next(i for i, c in enumerate(setup) if "-e ~/adapterfleet" in c)
    assert torch < project
    head_start = " ".join(cluster["head_start_ray_commands"])
    worker_start = " ".join(cluster["worker_start_ray_commands"])
    assert "RAY_AUTH_MODE=token" in head_start and "RAY_AUTH_MODE=token" in worker_start
    assert "--dashboard-host=127.0.0.1" in head_start
    assert "mlflow server" in head_start and '"$MLFLOW_BACKEND_STORE_URI"' in head_start
    assert "--artifacts-destination" in head_start
    assert cluster["file_mounts"]["~/.ray/auth_token"] == "~/.ray/auth_token"


@pytest.mark.parametrize(
    ("change", "error"),
    [
        (
            lambda c: c["available_node_types"]["ray.worker.g5"]["resources"].update(GPU=0.5),
            jsonschema.ValidationError,
        ),
        (lambda c: c.update(head_node_type="ray.head.missing"), ValueError),
        (lambda c: c.update(storage="s3://bucket/ray"), jsonschema.ValidationError),
        # 4.0 passes the schema (JSON has one number type) but Ray wants an int
        (
            lambda c: c["available_node_types"]["ray.worker.g5"]["resources"].update(CPU=4.0),
            ValueError,
        ),
    ],
)
def test_check_rejects_broken_files(cluster: dict[str, Any], change: Any, error: type) -> None:
    broken = copy.deepcopy(cluster)
    change(broken)
    with pytest.raises(error):
        check(broken)
