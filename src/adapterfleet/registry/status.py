"""Read-only view of a pipeline's MLflow runs, for `adapterfleet status`.

One paged search over the pipeline's experiment returns every sweep, trial and fusion run with
its tags, status and latest metrics, and the experiment's tags come with it. On a SQLite store
these are direct read-only queries (`sqlite_read`), on a tracking server a few REST requests
(`rest_read`); neither imports MLflow, and both fall back to MLflow's client when the store
answers in a way they do not know. Nothing is created or modified (a SQLite store whose file
does not exist yet reads as empty instead of being created).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from adapterfleet.registry import rest_read, sqlite_read
from adapterfleet.registry.errors import RegistryError, failed_reading
from adapterfleet.registry.sqlite_read import Unreadable
from adapterfleet.registry.store import check_tracking_uri, get_client, missing_store, sqlite_path
from adapterfleet.registry.tags import (
    TAG_BUDGET,
    TAG_CONFIG_HASH,
    TAG_KIND,
    TAG_OVERRIDES,
    TAG_PARENT_RUN,
    TAG_SEED,
    TAG_STOPPED_EARLY,
    TAG_SWEEP,
    TAG_SYSTEM,
    TAG_TASK,
    TAG_TRIAL_ID,
)

if TYPE_CHECKING:
    from mlflow import MlflowClient

RUNNING = ("RUNNING", "SCHEDULED")
# not KILLED: how a run ends that was stopped (Ctrl-C, SIGTERM: `ended_by`); the next run
# reopens it and goes on, so `status` counts it pending
FAILED = ("FAILED",)
_KEPT_TAGS = (
    TAG_KIND,
    TAG_PARENT_RUN,
    TAG_SWEEP,
    TAG_TASK,
    TAG_TRIAL_ID,
    TAG_SYSTEM,
    TAG_SEED,
    TAG_STOPPED_EARLY,
    TAG_OVERRIDES,  # on a sweep run: the `-o` its sweep was started with
    TAG_BUDGET,
    TAG_CONFIG_HASH,  # on a sweep run: its settings, so `status -c` counts its config's sweep
)
_PAGE = 1000


@dataclass(frozen=True)
class RunRecord:
    """One run as plain data: status, start time (ms), adapterfleet tags, latest metrics."""

    run_id: str
    status: str
    start_time: int
    tags: dict[str, str] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)

    @property
    def kind(self) -> str:
        """The kind tag ('trial', 'sweep', 'fusion', 'baseline', ...); without one, 'trial' for
        a run with a trial id, 'sweep' for one with a sweep tag, else ''. Fusion and baseline
        runs carry a trial id too: the kind tag decides."""
        kind = self.tags.get(TAG_KIND, "")
        if kind:
            return kind
        if TAG_TRIAL_ID in self.tags:
            return "trial"
        return "sweep" if TAG_SWEEP in self.tags else ""

    @property
    def task(self) -> str | None:
        return self.tags.get(TAG_TASK)

    @property
    def system(self) -> str | None:
        """The Table 1 system of a baseline or fusion run ("head", "mt-a", ...)."""
        return self.tags.get(TAG_SYSTEM)

    @property
    def seed(self) -> str | None:
        return self.tags.get(TAG_SEED)

    @property
    def trial_id(self) -> str | None:
        return self.tags.get(TAG_TRIAL_ID)

    @property
    def parent_run_id(self) -> str | None:
        return self.tags.get(TAG_PARENT_RUN)

    @property
    def stopped_early(self) -> bool:
        """A trial the scheduler (ASHA) stopped: FINISHED, but it saved no adapter."""
        return TAG_STOPPED_EARLY in self.tags


def experiment_runs(uri: str, experiment_name: str) -> list[RunRecord] | None:
    """Every active run of experiment `experiment_name`, oldest first; None when the store
    or the experiment does not exist."""
    found = experiment_runs_and_tags(uri, experiment_name)
    return None if found is None else found[0]


def experiment_names(uri: str, limit: int = 20) -> list[str]:
    """The names of the store's active experiments (MLflow's `Default` left out), for a
    message; empty when the store cannot say, or does not exist (none is created)."""
    if missing_store(uri) is not None:
        return []
    try:
        found = get_client(uri).search_experiments(max_results=limit)
    except Exception:  # noqa: BLE001 - only a hint in an error message
        return []
    return sorted(e.name for e in found if e.name != "Default")


def experiment_runs_and_tags(
    uri: str, experiment_name: str, page: int = rest_read.RUNS_PAGE
) -> tuple[list[RunRecord], dict[str, str]] | None:
    """Every active run of experiment `experiment_name`, oldest first, and the experiment's
    tags; None when the store or the experiment does not exist. `page`: runs per request to a
    tracking server."""
    db = sqlite_path(uri)
    if db is not None and not db.is_file():
        return None
    try:
        if db is not None:
            return _sqlite_runs(db, experiment_name)
        if rest_read.is_http(uri):
            return _rest_runs(uri, experiment_name, page)
    except Unreadable:
        pass  # not a store the direct reads know: ask MLflow
    if db is None and not uri.startswith("file:"):
        check_tracking_uri(uri)
    try:
        client = get_client(uri)
        experiment = client.get_experiment_by_name(experiment_name)
        if experiment is None or experiment.lifecycle_stage == "deleted":
            return None
        runs = _search_all(client, str(experiment.experiment_id))
        return runs, {str(k): str(v) for k, v in (experiment.tags or {}).items()}
    except RegistryError:
        raise
    except Exception as exc:
        what = f"reading runs of experiment {experiment_name!r}"
        raise failed_reading(what, uri, exc) from exc


def best_logged(uri: str, run_ids: Sequence[str], key: str, highest: bool) -> dict[str, float]:
    """The best value each run of `run_ids` logged for metric `key` over its history (the
    highest, or the lowest when not `highest`); runs that logged none are left out. For the
    trials still running, whose latest epoch need not be their best: one query on SQLite, a
    request per run to a tracking server."""
    if not run_ids:
        return {}
    db = sqlite_path(uri)
    try:
        if db is not None:
            return sqlite_read.best_values(db, run_ids, key, highest)
        if rest_read.is_http(uri):
            server = rest_read.Server.from_uri(uri)
            found = {run: rest_read.best_value(server, run, key, highest) for run in run_ids}
            return {run: value for run, value in found.items() if value is not None}
    except Unreadable:
        pass  # not a store the direct reads know: ask MLflow
    try:
        client = get_client(uri)
        pick = max if highest else min
        out = {}
        for run in run_ids:
            values = [m.value for m in client.get_metric_history(run, key) if m.value == m.value]
            if values:
                out[run] = float(pick(values))
        return out
    except RegistryError:
        raise
    except Exception as exc:
        raise failed_reading(f"reading the history of {key!r}", uri, exc) from exc


def _sqlite_runs(db: Path, experiment_name: str) -> tuple[list[RunRecord], dict[str, str]] | None:
    experiment = sqlite_read.experiment_id(db, experiment_name)
    if experiment is None:
        return None
    rows = sqlite_read.active_runs(db, experiment, _KEPT_TAGS)
    return _records(rows), sqlite_read.experiment_tags(db, experiment)


def _rest_runs(
    uri: str, experiment_name: str, page: int
) -> tuple[list[RunRecord], dict[str, str]] | None:
    server = rest_read.Server.from_uri(uri)
    found = rest_read.experiment(server, experiment_name)
    if found is None:
        return None
    experiment, tags = found
    return _records(rest_read.active_runs(server, experiment, _KEPT_TAGS, page)), tags


def _records(rows: Iterable[rest_read.RunRow]) -> list[RunRecord]:
    return [
        RunRecord(run_id=run, status=status, start_time=start, tags=tags, metrics=metrics)
        for run, status, start, tags, metrics in rows
    ]


def _search_all(client: MlflowClient, experiment_id: str) -> list[RunRecord]:
    from mlflow.entities import ViewType

    out: list[RunRecord] = []
    token: str | None = None
    while True:
        page = client.search_runs(
            [experiment_id],
            run_view_type=ViewType.ACTIVE_ONLY,
            max_results=_PAGE,
            order_by=["attributes.start_time ASC"],
            page_token=token,
        )
        for run in page:
            tags = run.data.tags or {}
            out.append(
                RunRecord(
                    run_id=run.info.run_id,
                    status=str(run.info.status),
                    start_time=int(run.info.start_time or 0),
                    tags={k: str(tags[k]) for k in _KEPT_TAGS if k in tags},
                    metrics={k: float(v) for k, v in (run.data.metrics or {}).items()},
                )
            )
        token = page.token
        if not token:
            return out
