"""Read the results a pipeline left in MLflow: its experiment, its finished runs (all tags,
params and latest metrics) and single artifact files, for `adapterfleet report`.

Nothing is created or modified; a SQLite store whose file does not exist is reported as
missing instead of being created. On a SQLite store, a missing experiment and an experiment
without finished runs are found with direct read-only queries (`sqlite_read`), without the
seconds that importing MLflow and opening its store cost. Every failure is one `RegistryError`
line.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from adapterfleet.registry import sqlite_read
from adapterfleet.registry.errors import RegistryError, call_with_retry, failed_reading, safe_uri
from adapterfleet.registry.store import check_tracking_uri, get_client, sqlite_path
from adapterfleet.registry.tags import TAG_KIND, quote

if TYPE_CHECKING:
    from mlflow import MlflowClient
    from mlflow.entities import Run

T = TypeVar("T")

_PAGE = 1000
_RETRY_S = 30.0


@dataclass(frozen=True)
class ExperimentData:
    """An experiment as plain data: its id, name and tags."""

    experiment_id: str
    name: str
    tags: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class RunData:
    """One finished run as plain data: start time (ms), every tag, param and latest metric."""

    run_id: str
    start_time: int
    tags: dict[str, str] = field(default_factory=dict, repr=False)  # a report's repr stays short
    params: dict[str, str] = field(default_factory=dict, repr=False)
    metrics: dict[str, float] = field(default_factory=dict)

    def value(self, key: str) -> str | None:
        """The tag `key`, else the param `key`, else None."""
        return self.tags.get(key, self.params.get(key))


def find_experiment(uri: str, name: str) -> ExperimentData:
    """The active experiment `name` of the store at `uri`; `RegistryError` when the store
    cannot be reached or holds no such experiment."""
    db = sqlite_path(uri)
    if db is not None and (not db.is_file() or _sqlite_lacks(db, name)):
        raise RegistryError(_missing(uri, name))
    if db is None and not uri.startswith("file:"):
        check_tracking_uri(uri)
    experiment = _guarded(
        uri, f"looking up experiment {name!r}", lambda: get_client(uri).get_experiment_by_name(name)
    )
    if experiment is None or experiment.lifecycle_stage == "deleted":
        raise RegistryError(_missing(uri, name))
    return ExperimentData(str(experiment.experiment_id), name, dict(experiment.tags or {}))


def _missing(uri: str, name: str) -> str:
    """No experiment `name`: the pipelines the store holds, and that a budget may name its
    own (`report -c` without the `--budget` a run used looked for the config's bare name)."""
    from adapterfleet.registry.status import experiment_names

    there = ", ".join(experiment_names(uri)) or "none"
    return (
        f"no experiment {name!r} in {safe_uri(uri)} (pipelines there: {there}); check the "
        "name, or with -c CONFIG give the --budget and -o the runs were made with (a budget "
        "may name its pipeline), or pass --tracking-uri"
    )


def finished_runs(uri: str, experiment_id: str, kinds: Sequence[str]) -> list[RunData]:
    """Every active FINISHED run of the experiment whose `adapterfleet.kind` is one of
    `kinds`, oldest first (one paged search per kind)."""
    db = sqlite_path(uri)
    if db is not None and db.is_file() and _sqlite_none_finished(db, experiment_id, kinds):
        return []
    client = _guarded(uri, "opening the tracking store", lambda: get_client(uri))
    runs: list[RunData] = []
    for kind in kinds:
        what = f"reading {kind} runs of experiment {experiment_id}"
        runs += _guarded(uri, what, lambda k=kind: _search(client, experiment_id, k))
    return sorted(runs, key=lambda r: (r.start_time, r.run_id))


def active_runs(uri: str, experiment_id: str, kind: str) -> list[RunData]:
    """Every active run of the experiment whose `adapterfleet.kind` is `kind`, whatever its
    status (a sweep run a Ctrl-C ended still names the settings of its finished trials)."""
    client = _guarded(uri, "opening the tracking store", lambda: get_client(uri))
    what = f"reading {kind} runs of experiment {experiment_id}"
    return _guarded(uri, what, lambda: _search(client, experiment_id, kind, finished=False))


def download_run_file(uri: str, run_id: str, path: str, dst: str | os.PathLike[str]) -> Path | None:
    """Download the artifact file `path` of run `run_id` into folder `dst`; None when the run
    has no such file."""
    from mlflow.artifacts import download_artifacts

    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    client = _guarded(uri, "opening the tracking store", lambda: get_client(uri))
    parent = os.path.dirname(path) or None
    listed = _guarded(
        uri, f"listing artifacts of run {run_id}", lambda: client.list_artifacts(run_id, parent)
    )
    if not any(item.path == path and not item.is_dir for item in listed):
        return None
    Path(dst).mkdir(parents=True, exist_ok=True)
    local = _guarded(
        uri,
        f"downloading runs:/{run_id}/{path}",
        lambda: download_artifacts(
            run_id=run_id, artifact_path=path, dst_path=str(dst), tracking_uri=uri
        ),
    )
    return Path(local)


def _sqlite_lacks(db: Path, name: str) -> bool:
    """True when the SQLite store surely has no active experiment `name`."""
    try:
        return sqlite_read.experiment_id(db, name) is None
    except sqlite_read.Unreadable:
        return False  # another schema: let MLflow answer


def _sqlite_none_finished(db: Path, experiment_id: str, kinds: Sequence[str]) -> bool:
    """True when the SQLite store surely has no FINISHED run of `kinds` in the experiment."""
    try:
        runs = sqlite_read.active_runs(db, experiment_id, (TAG_KIND,))
    except sqlite_read.Unreadable:
        return False
    return not any(
        status == "FINISHED" and tags.get(TAG_KIND) in kinds for _, status, _, tags, _ in runs
    )


def _search(
    client: MlflowClient, experiment_id: str, kind: str, *, finished: bool = True
) -> list[RunData]:
    from mlflow.entities import ViewType

    query = f"tags.`{TAG_KIND}` = {quote(kind)}"
    if finished:
        query = f"attributes.status = 'FINISHED' AND {query}"
    out: list[RunData] = []
    token: str | None = None
    while True:
        page = client.search_runs(
            [experiment_id],
            filter_string=query,
            run_view_type=ViewType.ACTIVE_ONLY,
            max_results=_PAGE,
            order_by=["attributes.start_time ASC"],
            page_token=token,
        )
        out += [_run_data(run) for run in page]
        token = page.token
        if not token:
            return out


def _run_data(run: Run) -> RunData:
    info, data = run.info, run.data
    return RunData(
        run_id=str(info.run_id),
        start_time=int(info.start_time or 0),
        tags=_strings(data.tags),
        params=_strings(data.params),
        metrics={str(k): float(v) for k, v in (data.metrics or {}).items()},
    )


def _strings(values: Mapping[str, object] | None) -> dict[str, str]:
    return {str(k): str(v) for k, v in (values or {}).items()}


def _guarded(uri: str, what: str, fn: Callable[[], T]) -> T:
    """`fn()` with transient failures retried; any failure becomes one `RegistryError` line."""
    try:
        return call_with_retry(fn, what=what, timeout_s=_RETRY_S)
    except RegistryError:
        raise
    except Exception as exc:
        raise failed_reading(what, uri, exc) from exc
