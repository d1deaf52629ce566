"""MLflow runs for sweeps and trials, bound to an explicit client (no fluent global state)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from adapterfleet.disk import watch_library_logs
from adapterfleet.registry.descriptions import TAG_NOTE, prune_note, report_note
from adapterfleet.registry.environment import TAG_USER, environment_tags, run_driver, run_user
from adapterfleet.registry.errors import call_with_retry
from adapterfleet.registry.redact import redact
from adapterfleet.registry.store import get_client
from adapterfleet.registry.tags import (
    TAG_DRIVER,
    TAG_KIND,
    TAG_PARENT_RUN,
    TAG_PRUNED_FROM,
    TAG_REPORT_SCOPE,
    TAG_SEED,
    TAG_SWEEP,
    TAG_SYSTEM,
    TAG_TASK,
    TAG_TRIAL_ID,
    quote,
)

if TYPE_CHECKING:
    from mlflow import MlflowClient

T = TypeVar("T")

END_STATUSES = ("FINISHED", "FAILED", "KILLED")
DEFAULT_RETRY_TIMEOUT_S = 120.0
_PARAMS_TAGS_PER_BATCH = 100
_METRICS_PER_BATCH = 1000


class MlflowRunLogger:
    """Logs to one MLflow run through its own client, so many runs can be open per process.

    Every call retries transient failures (connection refused, HTTP 429/5xx) with capped
    exponential back-off for at most `retry_timeout_s`, then raises `RegistryError`. A call
    is repeated only after it raised. Over HTTP each attempt also carries MLflow's own urllib3
    retries (`MLFLOW_HTTP_REQUEST_MAX_RETRIES`, default 7, about 4 minutes with the default
    back-off), so the real bound is that plus `retry_timeout_s`; lower that variable in trial
    processes for a tighter bound. Params and tags are redacted (`***`) before logging.
    Pickles to (uri, run_id), so it can be handed to a Ray worker.
    """

    def __init__(
        self,
        client: MlflowClient,
        run_id: str,
        *,
        uri: str | None = None,
        retry_timeout_s: float = DEFAULT_RETRY_TIMEOUT_S,
    ) -> None:
        self._client = client
        self._run_id = run_id
        self._uri = uri if uri is not None else client.tracking_uri
        self.retry_timeout_s = retry_timeout_s
        self.ended: str | None = None  # the status this logger ended the run with

    @classmethod
    def attach(
        cls, uri: str, run_id: str, *, retry_timeout_s: float = DEFAULT_RETRY_TIMEOUT_S
    ) -> MlflowRunLogger:
        """A logger for an existing run, e.g. inside a Ray worker."""
        return cls(get_client(uri), run_id, uri=uri, retry_timeout_s=retry_timeout_s)

    def __reduce__(self) -> tuple[Callable[..., MlflowRunLogger], tuple[Any, ...]]:
        return (_reattach, (self._uri, self._run_id, self.retry_timeout_s))

    @property
    def run_id(self) -> str:
        return self._run_id

    @property
    def uri(self) -> str:
        return self._uri

    def _retry(self, what: str, fn: Callable[[], T]) -> T:
        return call_with_retry(
            fn, what=f"{what} (run {self._run_id})", timeout_s=self.retry_timeout_s
        )

    def log_params(self, params: Mapping[str, Any]) -> None:
        from mlflow.entities import Param

        items = [Param(k, v) for k, v in redact(params).items()]
        for chunk in _chunks(items, _PARAMS_TAGS_PER_BATCH):
            self._retry(
                "log params", lambda c=chunk: self._client.log_batch(self._run_id, params=c)
            )

    def log_new_params(self, params: Mapping[str, Any]) -> None:
        """`log_params` of the keys the run does not hold yet: a reopened run keeps the values
        it was logged with (MLflow refuses to change a param)."""
        run = self._retry("read params", lambda: self._client.get_run(self._run_id))
        self.log_params({k: v for k, v in params.items() if k not in run.data.params})

    def set_description(self, text: str) -> None:
        """The run's description in the MLflow UI (markdown; the `mlflow.note.content` tag)."""
        self.set_tags({TAG_NOTE: text})

    def set_tags(self, tags: Mapping[str, Any]) -> None:
        from mlflow.entities import RunTag

        items = [RunTag(k, v) for k, v in redact(tags).items()]
        for chunk in _chunks(items, _PARAMS_TAGS_PER_BATCH):
            self._retry("set tags", lambda c=chunk: self._client.log_batch(self._run_id, tags=c))

    def log_metrics(self, metrics: Mapping[str, float], step: int | None = None) -> None:
        """Log numeric metrics at `step`; None values are skipped."""
        from mlflow.entities import Metric

        stamp = int(time.time() * 1000)
        items = [
            Metric(str(k), float(v), stamp, int(step or 0))
            for k, v in metrics.items()
            if v is not None
        ]
        for chunk in _chunks(items, _METRICS_PER_BATCH):
            self._retry(
                "log metrics", lambda c=chunk: self._client.log_batch(self._run_id, metrics=c)
            )

    def logged_steps(self, key: str) -> set[int]:
        """The steps at which the run holds metric `key` (a resumed job logs the others)."""
        history = self._retry(
            f"read metric {key!r}", lambda: self._client.get_metric_history(self._run_id, key)
        )
        return {m.step for m in history}

    def log_artifacts(self, local_dir: str | Path, artifact_path: str | None = None) -> None:
        """Upload the contents of `local_dir` under `artifact_path` of the run."""
        folder = Path(local_dir)
        if not folder.is_dir():
            raise FileNotFoundError(f"artifact folder {folder} does not exist")
        self._retry(
            "log artifacts",
            lambda: self._client.log_artifacts(self._run_id, str(folder), artifact_path),
        )

    def log_artifact(self, local_file: str | Path, artifact_path: str | None = None) -> None:
        """Upload one file under `artifact_path` of the run."""
        path = Path(local_file)
        if not path.is_file():
            raise FileNotFoundError(f"artifact file {path} does not exist")
        self._retry(
            "log artifact",
            lambda: self._client.log_artifact(self._run_id, str(path), artifact_path),
        )

    @contextmanager
    def system_metrics(
        self, interval_s: float = 10.0, enabled: bool | None = None
    ) -> Iterator[None]:
        """Sample CPU, memory, disk, network (and GPU where available) into this run's
        `system/*` metrics while the block runs; nothing when psutil is missing.

        Off unless `enabled`, or (None) MLflow's own switch `MLFLOW_ENABLE_SYSTEM_METRICS_LOGGING`
        is true: the UI lists a run's system metrics above its own."""
        if enabled is None:
            enabled = _system_metrics_switch()
        if not enabled:
            yield
            return
        try:
            from mlflow.system_metrics.system_metrics_monitor import SystemMetricsMonitor

            monitor = SystemMetricsMonitor(
                self.run_id,
                sampling_interval=interval_s,
                resume_logging=True,
                tracking_uri=self.uri,
            )
            monitor.start()
        except Exception:  # noqa: BLE001 - system metrics are a nicety, never a failure
            yield
            return
        try:
            yield
        finally:
            monitor.finish()

    def end(self, status: str = "FINISHED") -> None:
        if status not in END_STATUSES:
            raise ValueError(f"status must be one of {END_STATUSES}, got {status!r}")
        self._retry("end run", lambda: self._client.set_terminated(self._run_id, status))
        self.ended = status

    def __enter__(self) -> MlflowRunLogger:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            self.end("FINISHED")
        else:
            self.end("KILLED" if issubclass(exc_type, KeyboardInterrupt) else "FAILED")


def _system_metrics_switch() -> bool:
    from mlflow.environment_variables import MLFLOW_ENABLE_SYSTEM_METRICS_LOGGING

    return bool(MLFLOW_ENABLE_SYSTEM_METRICS_LOGGING.get())


def _reattach(uri: str, run_id: str, retry_timeout_s: float) -> MlflowRunLogger:
    return MlflowRunLogger.attach(uri, run_id, retry_timeout_s=retry_timeout_s)


def _chunks(items: list[T], size: int) -> list[list[T]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


def _find_run(client: MlflowClient, experiment_id: str, match: Mapping[str, str]) -> str | None:
    """Oldest active run of the experiment whose tags equal `match`, or None."""
    clauses = " AND ".join(f"tags.`{key}` = {quote(value)}" for key, value in match.items())
    runs = client.search_runs(
        [experiment_id], filter_string=clauses, order_by=["attributes.start_time ASC"]
    )
    return runs[0].info.run_id if runs else None


def _open_run(
    uri: str,
    experiment_id: str,
    match: Mapping[str, str],
    run_name: str,
    tags: Mapping[str, Any] | None,
    retry_timeout_s: float,
) -> MlflowRunLogger:
    watch_library_logs()  # a trial's or job's process too: a full disk is one line, no traceback
    client = get_client(uri)
    all_tags = {**environment_tags(), TAG_DRIVER: run_driver(), **redact(tags), **match}

    def find_or_create() -> tuple[str, bool]:
        # Searching first on every attempt means a create whose reply was lost is found,
        # not repeated. The creator is set here only: a run reopened on resume keeps its own
        # (create_run takes the run's user_id from the tag).
        found = _find_run(client, experiment_id, match)
        if found is not None:
            return found, True
        created = {TAG_USER: run_user(), **all_tags}
        return client.create_run(experiment_id, tags=created, run_name=run_name).info.run_id, False

    run_id, reused = call_with_retry(
        find_or_create,
        what=f"open run {run_name!r} in experiment {experiment_id}",
        timeout_s=retry_timeout_s,
    )
    logger = MlflowRunLogger(client, run_id, uri=uri, retry_timeout_s=retry_timeout_s)
    if reused:
        logger._retry("reopen run", lambda: client.update_run(run_id, status="RUNNING"))
        logger.set_tags(all_tags)
    return logger


def open_sweep_run(
    uri: str,
    experiment_id: str,
    sweep_name: str,
    task: str,
    tags: Mapping[str, Any] | None = None,
    *,
    retry_timeout_s: float = DEFAULT_RETRY_TIMEOUT_S,
) -> MlflowRunLogger:
    """The parent run of a sweep, named `sweep <task>`: reused (and set RUNNING) when one tagged
    `adapterfleet.sweep=<sweep_name>` (and the same task) exists in the experiment, created
    otherwise."""
    match = {TAG_KIND: "sweep", TAG_SWEEP: sweep_name, TAG_TASK: task}
    return _open_run(uri, experiment_id, match, f"sweep {task}", tags, retry_timeout_s)


def open_trial_run(
    uri: str,
    experiment_id: str,
    parent_run_id: str | None,
    trial_id: str,
    run_name: str | None = None,
    params: Mapping[str, Any] | None = None,
    tags: Mapping[str, Any] | None = None,
    *,
    retry_timeout_s: float = DEFAULT_RETRY_TIMEOUT_S,
) -> MlflowRunLogger:
    """The run of one trial: reused (and set RUNNING) when a run tagged
    `adapterfleet.trial_id=<trial_id>` under the same parent exists, created otherwise.
    The parent is linked with the `mlflow.parentRunId` tag; `params` are logged (redacted)."""
    match = {TAG_KIND: "trial", TAG_TRIAL_ID: trial_id}
    if parent_run_id:
        match[TAG_PARENT_RUN] = parent_run_id
    logger = _open_run(uri, experiment_id, match, run_name or trial_id, tags, retry_timeout_s)
    if params:
        logger.log_params(params)
    return logger


def open_fusion_run(
    uri: str,
    experiment_id: str,
    target: str,
    fusion_id: str,
    params: Mapping[str, Any] | None = None,
    tags: Mapping[str, Any] | None = None,
    *,
    run_name: str | None = None,
    retry_timeout_s: float = DEFAULT_RETRY_TIMEOUT_S,
) -> MlflowRunLogger:
    """The run of one fusion training (`adapterfleet.kind=fusion`), reused like a trial's run
    when one with the same `fusion_id` for `target` exists (whatever its name: a run made
    before fusion runs named their seed keeps `fusion-<target>`). Named `run_name`, else
    `fusion_id`."""
    match = {TAG_KIND: "fusion", TAG_TRIAL_ID: fusion_id, TAG_TASK: target}
    name = run_name or fusion_id
    logger = _open_run(uri, experiment_id, match, name, tags, retry_timeout_s)
    if params:
        logger.log_params(params)
    return logger


def open_prune_run(
    uri: str,
    experiment_id: str,
    target: str,
    source: str,
    tags: Mapping[str, Any] | None = None,
    *,
    retry_timeout_s: float = DEFAULT_RETRY_TIMEOUT_S,
) -> MlflowRunLogger:
    """The run of one pruning of `target`'s fusion version `source` ("vN", kind `prune`):
    reused when the same pruning runs again."""
    match = {TAG_KIND: "prune", TAG_TASK: target, TAG_PRUNED_FROM: source}
    tags = {TAG_NOTE: prune_note(target, source), **(tags or {})}
    return _open_run(uri, experiment_id, match, f"prune-{target}-{source}", tags, retry_timeout_s)


def open_baseline_run(
    uri: str,
    experiment_id: str,
    job_id: str,
    system: str,
    task: str,
    seed: int,
    params: Mapping[str, Any] | None = None,
    *,
    kind: str = "baseline",
    retry_timeout_s: float = DEFAULT_RETRY_TIMEOUT_S,
) -> MlflowRunLogger:
    """The run of one baseline of the paper's Table 1 (`system` such as "head" or "mt-a") on
    `task` with `seed`, tagged with all three; reused when a run of the same `job_id` (which
    names the settings) exists. A baseline run holds the task's `best_dev_<metric>` and
    `best_epoch`; `kind="mt-a"` is the joint training run that MT-A's per-task baseline runs
    hang under."""
    match = {TAG_KIND: kind, TAG_TRIAL_ID: job_id}
    tags = {TAG_SYSTEM: system, TAG_TASK: task, TAG_SEED: str(int(seed))}
    logger = _open_run(uri, experiment_id, match, job_id, tags, retry_timeout_s)
    if params:
        logger.log_params(params)
    return logger


def finished_run_metrics(
    uri: str, experiment_id: str, kind: str, job_id: str
) -> dict[str, float] | None:
    """The latest metrics of the FINISHED run of `kind` tagged with `job_id`, or None."""
    client = get_client(uri)
    match = {TAG_KIND: kind, TAG_TRIAL_ID: job_id}
    clauses = " AND ".join(f"tags.`{key}` = {quote(value)}" for key, value in match.items())
    runs = call_with_retry(
        lambda: client.search_runs([experiment_id], filter_string=clauses),
        what=f"search runs of {job_id!r}",
        timeout_s=DEFAULT_RETRY_TIMEOUT_S,
    )
    finished = [r for r in runs if r.info.status == "FINISHED"]
    return dict(finished[0].data.metrics) if finished else None


def open_report_run(uri: str, experiment_id: str, scope: str = "all") -> MlflowRunLogger:
    """The run `adapterfleet report` logs its table and figure to (kind `report`), reused by
    every later report of the experiment and `scope` (`TAG_REPORT_SCOPE`): one of every run
    replaced that of a config's settings, with its chance notes."""
    match = {TAG_KIND: "report", TAG_REPORT_SCOPE: scope}
    name = {"all": "report (all runs)", "config": "report"}.get(scope, f"report ({scope})")
    tags = {TAG_NOTE: report_note(scope)}
    return _open_run(uri, experiment_id, match, name, tags, DEFAULT_RETRY_TIMEOUT_S)
