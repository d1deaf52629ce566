"""Fixtures for the report tests: one real SQLite MLflow store for the session, fresh pipelines
(experiments) in it, and the Table 1 pipeline most tests read (`report_support`)."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path

import pytest

os.environ["MLFLOW_DISABLE_TELEMETRY"] = "true"
os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")

from report_support import Pipeline, table1_pipeline_in, uid  # noqa: E402

from adapterfleet.registry import default_tracking_uri, ensure_experiment  # noqa: E402
from adapterfleet.results.report import ReportResult, build_report  # noqa: E402


@pytest.fixture(scope="session")
def report_uri(tmp_path_factory: pytest.TempPathFactory) -> str:
    """One SQLite store for the session (creating its schema takes seconds)."""
    return default_tracking_uri(tmp_path_factory.mktemp("report-store"))


@pytest.fixture
def new_pipeline(report_uri: str, tmp_path: Path) -> Callable[..., Pipeline]:
    """Makes a pipeline with a fresh experiment (optionally tagged) in the session's store."""

    def make(tags: Mapping[str, str] | None = None) -> Pipeline:
        name = uid("report")
        return Pipeline(report_uri, name, ensure_experiment(report_uri, name, tags=tags), tmp_path)

    return make


@pytest.fixture(scope="session")
def table1_pipeline(report_uri: str, tmp_path_factory: pytest.TempPathFactory) -> Pipeline:
    return table1_pipeline_in(report_uri, tmp_path_factory.mktemp("table1-files"))


@pytest.fixture(scope="session")
def table1_report(
    table1_pipeline: Pipeline, tmp_path_factory: pytest.TempPathFactory
) -> ReportResult:
    """The report of `table1_pipeline`, built once (and logged to MLflow)."""
    out = tmp_path_factory.mktemp("table1-report") / "out"
    return build_report(table1_pipeline.name, table1_pipeline.uri, out)
