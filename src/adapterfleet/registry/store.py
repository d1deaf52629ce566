"""Tracking store resolution: default URI, reachability check, clients, experiments."""

from __future__ import annotations

import base64
import os
import socket
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from adapterfleet._locks import exclusive_lock
from adapterfleet.registry.descriptions import TAG_NOTE, made_by
from adapterfleet.registry.errors import RegistryError, safe_uri

if TYPE_CHECKING:
    from mlflow import MlflowClient

DB_FILENAME = "mlflow.db"
ARTIFACTS_DIRNAME = "mlartifacts"


def default_tracking_uri(home: Path) -> str:
    """Embedded default store: `sqlite:///<home>/mlflow.db` (artifacts in `<home>/mlartifacts`)."""
    return f"sqlite:///{Path(home).expanduser().resolve() / DB_FILENAME}"


def sqlite_path(uri: str) -> Path | None:
    """The database file of a `sqlite:///` URI, None for other schemes or an in-memory db."""
    if not uri.startswith("sqlite:"):
        return None
    path = urllib.parse.urlsplit(uri).path
    # sqlite:///rel.db -> path "/rel.db" (relative), sqlite:////abs.db -> "//abs.db"
    path = path[1:] if path.startswith("/") else path
    if not path or path == ":memory:":
        return None
    return Path(path).expanduser().resolve()


def default_artifact_location(uri: str) -> str | None:
    """Where experiments of `uri` keep artifacts when the caller does not say.

    For a SQLite store: `<folder of the db>/mlartifacts` (MLflow itself would pick `./mlruns`
    relative to the current directory). For a server: None, i.e. the server decides.
    """
    db = sqlite_path(uri)
    return (db.parent / ARTIFACTS_DIRNAME).as_uri() if db is not None else None


def check_tracking_uri(uri: str, timeout: float = 5.0) -> None:
    """Raise `RegistryError` (one line: URI, what failed, fix) when `uri` cannot be used.

    http(s): the server must answer `GET /health`. sqlite: the db folder must be creatable.
    Other database URIs: the host:port must accept a TCP connection.
    """
    shown = safe_uri(uri)
    scheme = urllib.parse.urlsplit(uri).scheme.lower()
    if scheme in ("http", "https"):
        _check_http(uri, shown, timeout)
    elif scheme == "sqlite":
        db = sqlite_path(uri)
        if db is None:
            return
        try:
            db.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise RegistryError(
                f"tracking URI {shown}: cannot create folder {db.parent} ({exc.strerror or exc}); "
                "choose a writable location for the MLflow database"
            ) from exc
    elif scheme == "file":
        folder = Path(urllib.parse.urlsplit(uri).path)
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise RegistryError(
                f"tracking URI {shown}: cannot create folder {folder} ({exc.strerror or exc}); "
                "choose a writable location"
            ) from exc
    elif scheme and scheme != "databricks":
        _check_tcp(uri, shown, timeout)
    elif not scheme:
        raise RegistryError(
            f"tracking URI {shown!r} has no scheme; use sqlite:///<path>/mlflow.db "
            "or http://<host>:<port>"
        )


def _check_http(uri: str, shown: str, timeout: float) -> None:
    url = uri.rstrip("/") + "/health"
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310
            status = response.status
    except urllib.error.HTTPError as exc:
        status = exc.code
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise RegistryError(
            f"tracking URI {shown}: no answer from {safe_uri(url)} ({reason}); start the server "
            "(mlflow server --host ... --port ...) or fix the tracking URI"
        ) from exc
    if status != 200:
        raise RegistryError(
            f"tracking URI {shown}: {safe_uri(url)} answered HTTP {status}; "
            "check that this URL is an MLflow tracking server"
        )
    _check_credentials(uri, shown, timeout)


def _check_credentials(uri: str, shown: str, timeout: float) -> None:
    """`/health` answers anyone; one small authenticated read tells whether a server started
    with `--app-name basic-auth` accepts the credentials of MLFLOW_TRACKING_USERNAME/PASSWORD."""
    url = uri.rstrip("/") + "/api/2.0/mlflow/experiments/search?max_results=1"
    request = urllib.request.Request(url)
    user = os.environ.get("MLFLOW_TRACKING_USERNAME")
    password = os.environ.get("MLFLOW_TRACKING_PASSWORD")
    if user and password:
        token = base64.b64encode(f"{user}:{password}".encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
    try:
        with urllib.request.urlopen(request, timeout=timeout):  # noqa: S310
            return
    except urllib.error.HTTPError as exc:
        status = exc.code
    except (urllib.error.URLError, OSError):
        return  # it answered /health: let the real calls retry and report
    if status == 401:
        given = "were refused" if user and password else "are not set"
        raise RegistryError(
            f"tracking URI {shown}: the server asks for a login (HTTP 401) and the credentials "
            f"{given}; set MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD"
        )
    if status == 403:
        raise RegistryError(
            f"tracking URI {shown}: user {user!r} may not read experiments (HTTP 403); ask the "
            "server's admin for READ/EDIT permission or use another account"
        )


def _check_tcp(uri: str, shown: str, timeout: float) -> None:
    parts = urllib.parse.urlsplit(uri)
    if not parts.hostname:
        return
    default_ports = {"postgresql": 5432, "mysql": 3306, "mssql": 1433}
    base = parts.scheme.split("+")[0]
    port = parts.port or default_ports.get(base)
    if port is None:
        return
    try:
        with socket.create_connection((parts.hostname, port), timeout=timeout):
            pass
    except OSError as exc:
        raise RegistryError(
            f"tracking URI {shown}: cannot connect to {parts.hostname}:{port} ({exc}); "
            "start the database or fix the tracking URI"
        ) from exc


_READY: set[str] = set()


def get_client(uri: str) -> MlflowClient:
    """An `MlflowClient` bound to `uri` for both tracking and registry (no global state)."""
    from mlflow import MlflowClient

    if not uri.startswith("sqlite:///") or uri in _READY:
        return MlflowClient(tracking_uri=uri, registry_uri=uri)
    with _store_lock(Path(uri.removeprefix("sqlite:///"))):
        client = MlflowClient(tracking_uri=uri, registry_uri=uri)
        client.search_experiments(max_results=1)  # tracking tables exist from here on
        client.search_registered_models(max_results=1)  # and registry tables
    _READY.add(uri)
    return client


@contextmanager
def _store_lock(db: Path) -> Iterator[None]:
    """One process at a time opens a SQLite store first: two processes creating a fresh store
    together both run the migrations and one fails with 'table ... already exists'."""
    with exclusive_lock(db.with_name(db.name + ".lock")):
        yield


def ensure_experiment(
    uri: str,
    name: str,
    artifact_location: str | None = None,
    tags: Mapping[str, str] | None = None,
) -> str:
    """Id of experiment `name`: created if missing, restored if deleted; `tags` set on it."""
    client = get_client(uri)
    experiment_id = _ensure_experiment(client, uri, name, artifact_location)
    for key, value in (tags or {}).items():
        client.set_experiment_tag(experiment_id, key, value)
    return experiment_id


def experiment_tags(uri: str, name: str) -> dict[str, str] | None:
    """The tags of experiment `name`; None when it does not exist (or is deleted)."""
    experiment = get_client(uri).get_experiment_by_name(name)
    if experiment is None or experiment.lifecycle_stage == "deleted":
        return None
    return dict(experiment.tags)


def _ensure_experiment(
    client: MlflowClient, uri: str, name: str, artifact_location: str | None
) -> str:
    from mlflow.exceptions import MlflowException

    experiment = client.get_experiment_by_name(name)
    if experiment is None:
        location = artifact_location or default_artifact_location(uri)
        try:
            note = {TAG_NOTE: f"Runs of the adapterfleet pipeline `{name}`.{made_by()}"}
            return str(client.create_experiment(name, artifact_location=location, tags=note))
        except MlflowException as exc:
            if exc.error_code != "RESOURCE_ALREADY_EXISTS":
                raise
            experiment = client.get_experiment_by_name(name)
            if experiment is None:  # pragma: no cover - created and deleted in between
                raise
    if experiment.lifecycle_stage == "deleted":
        client.restore_experiment(experiment.experiment_id)
    return str(experiment.experiment_id)
