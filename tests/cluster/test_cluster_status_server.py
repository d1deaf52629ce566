"""`adapterfleet status NAME --tracking-uri http://...` through a real `mlflow server` on the
400-trial store of test_cluster_status_sqlite: the same status as on SQLite and as MLflow's client
reads it, and the command imports neither mlflow nor torch nor ray on that path (nor on the
SQLite store by name)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import time
from pathlib import Path
from types import ModuleType

import pytest
from test_cluster_status_sqlite import Store, populated, populated_once  # noqa: F401 - fixtures

from adapterfleet.config import PipelineConfig
from adapterfleet.registry import ensure_experiment, rest_read
from adapterfleet.registry.sqlite_read import Unreadable
from adapterfleet.registry.store import sqlite_path
from adapterfleet.results.status import StatusPlan, pipeline_status, status_by_name

pytestmark = pytest.mark.integration

HEAVY = ("mlflow", "torch", "ray", "transformers")


def registry_conftest() -> ModuleType:
    """tests/registry/conftest.py (its `mlflow server` helper), loaded by path once."""
    name = "registry_conftest"
    if name not in sys.modules:
        path = Path(__file__).resolve().parents[1] / "registry" / "conftest.py"
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def imported_heavy(importtime: str) -> set[str]:
    """Top-level packages of HEAVY in the output of `python -X importtime`."""
    found = set()
    for line in importtime.splitlines():
        if line.startswith("import time:") and "|" in line:
            module = line.rsplit("|", 1)[1].strip().split(".")[0]
            if module in HEAVY:
                found.add(module)
    return found


def test_status_through_a_server_equals_sqlite_and_imports_no_mlflow(
    populated: tuple[PipelineConfig, Store],  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    config, store = populated
    ensure_experiment(store.uri, config.name, tags=StatusPlan.from_config(config).to_tags())
    on_sqlite = pipeline_status(config, config.tracking_uri)
    backend = sqlite_path(store.uri)
    assert backend is not None
    (tmp_path / "server").mkdir()
    with registry_conftest()._server(tmp_path / "server", backend=backend) as uri:
        by_name = status_by_name(config.name, uri)
        by_config = pipeline_status(config, uri)
        with monkeypatch.context() as patch:  # what MLflow's client reads, as status did before

            def unreadable(*args: object) -> None:
                raise Unreadable("test: take the MLflow path")

            patch.setattr(rest_read.Server, "from_uri", unreadable)
            by_mlflow = status_by_name(config.name, uri)

        started = time.perf_counter()
        command = [sys.executable, "-X", "importtime", "-m", "adapterfleet.cli.app"]
        result = subprocess.run(
            [*command, "status", config.name, "--tracking-uri", uri],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            timeout=120,
        )
        wall = time.perf_counter() - started
    print(f"\nstatus NAME --tracking-uri {uri} in a fresh process: {wall:.2f}s")
    assert result.returncode == 0, result.stderr[-2000:]
    assert imported_heavy(result.stderr) == set()
    assert by_name.experiment_found and by_name.tracking_uri == uri
    for view in (by_name, by_config, by_mlflow):
        assert view.tasks == on_sqlite.tasks and view.fusions == on_sqlite.fusions
    expected = by_mlflow.render()
    assert expected.splitlines()[0] == f"pipeline {config.name}  (tracking {uri})"
    assert expected.splitlines()[1:] == on_sqlite.render().splitlines()[1:]
    assert result.stdout.strip() == expected
    assert store.trials >= 400 and [t.done for t in by_name.tasks] == [60, 30, 100, 0]

    on_file = subprocess.run(  # the SQLite store by name: no MLflow either (experiment tags too)
        [*command, "status", config.name, "--tracking-uri", store.uri],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert on_file.returncode == 0, on_file.stderr[-2000:]
    assert imported_heavy(on_file.stderr) == set()
    assert on_file.stdout.strip() == on_sqlite.render()


def test_importtime_check_sees_mlflow_when_it_is_imported() -> None:
    """The check above can fail: `-X importtime` of a process that imports mlflow names it."""
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import mlflow.entities"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0 and "mlflow" in imported_heavy(result.stderr)
