"""Tracking store resolution: default URI, reachability check, clients."""

from __future__ import annotations

import base64
import contextlib
import os
import socket
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from adapterfleet._locks import exclusive_lock
from adapterfleet.console import Say
from adapterfleet.masking import split_login
from adapterfleet.registry.errors import RegistryError, fix_the_uri, safe_uri

if TYPE_CHECKING:
    from mlflow import MlflowClient

DB_FILENAME = "mlflow.db"
USERNAME_ENV = "MLFLOW_TRACKING_USERNAME"
PASSWORD_ENV = "MLFLOW_TRACKING_PASSWORD"
LOGIN_ENV = (USERNAME_ENV, PASSWORD_ENV, "MLFLOW_TRACKING_TOKEN")
STORE_TIMEOUT_S = 10.0  # how long a command waits for its tracking store before it refuses
QUIET_WAIT_S = 1.0  # waited without a word; a longer wait is said
ARTIFACTS_DIRNAME = "mlartifacts"


def default_tracking_uri(home: Path) -> str:
    """Embedded default store: `sqlite:///<home>/mlflow.db` (artifacts in `<home>/mlartifacts`)."""
    return f"sqlite:///{Path(home).expanduser().resolve() / DB_FILENAME}"


def use_login(uri: str, where: str = "tracking URI") -> str:
    """`uri` without its `user:password@`; the login goes to MLFLOW_TRACKING_USERNAME and
    MLFLOW_TRACKING_PASSWORD, where MLflow's client (and the REST reader, and the Ray workers
    and jobs started from this process) take it. MLflow 3.17 would also send a login written in
    the URI, but it prints the URI it was given (`View run ... at: http://user:password@...`).
    A login that differs from the one already in the environment is refused."""
    clean, user, password = split_login(uri)
    if user is None:
        return uri
    shown = safe_uri(uri)
    if password is None:
        raise RegistryError(
            f"{where} {shown}: a user without a password is not a login MLflow can send; set "
            f"{USERNAME_ENV} and {PASSWORD_ENV} (or MLFLOW_TRACKING_TOKEN) and leave it out"
        )
    set_user = os.environ.get(USERNAME_ENV, "")
    ours = set_user in _logins_moved and _logins_moved[set_user] == os.environ.get(PASSWORD_ENV)
    for name, value in ((USERNAME_ENV, user), (PASSWORD_ENV, password)):
        if not ours and os.environ.get(name) not in (None, "", value):
            raise RegistryError(
                f"{where} {shown} carries a login that {name} contradicts; give the login "
                f"once: in {USERNAME_ENV} and {PASSWORD_ENV}, not in the URI"
            )
    # a login an earlier URI of this process put there (a notebook's previous config) is
    # replaced: it was refused as if the user had set the variables
    os.environ[USERNAME_ENV], os.environ[PASSWORD_ENV] = user, password
    _logins_moved[user] = password
    return clean


_logins_moved: dict[str, str] = {}  # user -> password that `use_login` put in the environment


def login_env() -> dict[str, str]:
    """MLflow's login variables that are set here, for processes that do not inherit them
    (the workers of a Ray cluster joined by address)."""
    return {name: os.environ[name] for name in LOGIN_ENV if os.environ.get(name)}


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


def read_only_store(uri: str) -> bool:
    """Whether `uri` is a SQLite store there that this process cannot write (a read-only copy
    or mount): what only reads works there, a run or a logged report cannot."""
    db = sqlite_path(uri)
    if db is None or not db.is_file():
        return False
    try:
        with open(db, "r+b"):
            return False
    except OSError:
        return True


def default_artifact_location(uri: str) -> str | None:
    """Where experiments of `uri` keep artifacts when the caller does not say.

    For a SQLite store: `<folder of the db>/mlartifacts` (MLflow itself would pick `./mlruns`
    relative to the current directory). For a server: None, i.e. the server decides.
    """
    db = sqlite_path(uri)
    return (db.parent / ARTIFACTS_DIRNAME).as_uri() if db is not None else None


def check_store(
    uri: str,
    *,
    read_only: bool = False,
    must_exist: bool = True,
    say: Say | None = None,
    timeout: float | None = None,
) -> None:
    """What a command does first with its tracking store: `check_tracking_uri` within `timeout`
    seconds (default `store_timeout()`), saying what it waits for when the answer is slow: MLflow's
    own client retries a server that does not answer for minutes. A command that only reads
    (`read_only`) never creates a store: a SQLite or file store that is not there is refused
    (unless not `must_exist`: `status` shows the plan of a pipeline that has not run)."""
    if read_only and must_exist:
        _check_exists(uri)
    check_tracking_uri(uri, timeout or store_timeout(), say=say, create=not read_only)


def store_timeout() -> float:
    """How long a command waits for its tracking store: MLflow's MLFLOW_HTTP_REQUEST_TIMEOUT
    when set (a slow server is the user's to declare), else `STORE_TIMEOUT_S`."""
    try:
        value = float(os.environ.get("MLFLOW_HTTP_REQUEST_TIMEOUT") or STORE_TIMEOUT_S)
    except ValueError:
        return STORE_TIMEOUT_S
    return value if value > 0 else STORE_TIMEOUT_S


def missing_store(uri: str) -> Path | None:
    """The path of a SQLite or file store that was never written (None when it exists, or for
    a server): nothing can have been tracked or registered there."""
    db = sqlite_path(uri)
    parts = urllib.parse.urlsplit(uri)
    where = db if db is not None else Path(parts.path) if parts.scheme == "file" else None
    return where if where is not None and not where.exists() else None


def _check_exists(uri: str) -> None:
    where = missing_store(uri)
    if where is not None:
        raise RegistryError(
            f"no tracking store at {where}: nothing was tracked there yet; run the pipeline "
            "first, or point at the store it wrote (-o storage=..., -o tracking_uri=..., "
            "or $MLFLOW_TRACKING_URI)"
        )


def check_tracking_uri(
    uri: str, timeout: float = STORE_TIMEOUT_S, *, say: Say | None = None, create: bool = True
) -> None:
    """Raise `RegistryError` (one line: URI, what failed, fix) when `uri` cannot be used.

    http(s): the server must answer `GET /health` within `timeout` seconds (after the first
    second, `say` hears what is awaited). sqlite and file: the folder must exist or be
    creatable (`create`); nothing is created here. Other database URIs: the host:port must
    accept a TCP connection.
    """
    shown = safe_uri(uri)
    scheme = urllib.parse.urlsplit(uri).scheme.lower()
    if scheme == "file":
        _check_file_store(uri, shown)
    if scheme in ("http", "https"):
        _check_http(uri, shown, timeout, say)
    elif scheme in ("sqlite", "file"):
        folder = sqlite_path(uri) if scheme == "sqlite" else Path(urllib.parse.urlsplit(uri).path)
        if scheme == "sqlite" and folder is not None and folder.exists():
            _check_sqlite_file(folder, shown)
        if folder is None or not create:
            return
        _check_creatable(folder.parent if scheme == "sqlite" else folder, shown)
    elif scheme and scheme.split("+")[0] not in _store_schemes():
        raise RegistryError(
            f"tracking URI {shown!r}: MLflow has no tracking store for {scheme}://; use "
            "http(s)://<host>:<port>, sqlite:///<path>/mlflow.db or a database URI "
            "(postgresql://, mysql://, mssql://)"
        )
    elif scheme and scheme != "databricks":
        _check_tcp(uri, shown, timeout)
    elif not scheme:
        raise RegistryError(
            f"tracking URI {shown!r} has no scheme; use sqlite:///<path>/mlflow.db "
            "or http://<host>:<port>"
        )


def _check_file_store(uri: str, shown: str) -> None:
    """MLflow 3 refuses its file store (in maintenance mode) unless MLFLOW_ALLOW_FILE_STORE is
    set: `run` failed with its 76-line traceback after Ray started, `status` cut its message."""
    if os.environ.get("MLFLOW_ALLOW_FILE_STORE", "").strip().lower() in ("true", "1"):
        return
    folder = Path(urllib.parse.urlsplit(uri).path)
    raise RegistryError(
        f"tracking URI {shown!r}: MLflow's file store is in maintenance mode and refused; use "
        f"sqlite:///{folder}/mlflow.db (mlflow migrate-filestore moves what a file store "
        "holds), or set MLFLOW_ALLOW_FILE_STORE=true to use it all the same"
    )


def _store_schemes() -> set[str]:
    """The URI schemes MLflow has a tracking store for: its own and those of installed plugins
    (the `mlflow.tracking_store` entry points)."""
    from importlib.metadata import entry_points

    plugins = {entry.name for entry in entry_points(group="mlflow.tracking_store")}
    own = {"http", "https", "sqlite", "file", "postgresql", "mysql", "mssql"}
    return own | {"databricks", "databricks-uc", "uc"} | plugins


def folder_problem(folder: Path) -> str | None:
    """Why `folder` cannot be used or made (None when it can): its nearest existing ancestor is
    a file, or a folder in which no folder can be made (tried, and removed again)."""
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        return f"{existing} is a file, not a folder"
    if existing == folder:
        return None if os.access(folder, os.W_OK | os.X_OK) else f"{folder} is not writable"
    probe = existing / folder.relative_to(existing).parts[0]
    try:
        probe.mkdir()
    except FileExistsError:  # made meanwhile by another process
        return None
    except OSError as error:
        return f"cannot make a folder in {existing}: {error.strerror or error}"
    with contextlib.suppress(OSError):  # another process may be filling it already
        probe.rmdir()
    return None


def _check_sqlite_file(db: Path, shown: str) -> None:
    """An existing SQLite store must be a database file: a folder, or another file at its
    path, would otherwise surface as SQLAlchemy's traceback from the first query."""
    import sqlite3

    problem = "it is a folder" if db.is_dir() else None
    if problem is None:
        try:
            with contextlib.closing(sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True)) as link:
                link.execute("PRAGMA schema_version").fetchone()
        except sqlite3.OperationalError:  # busy or locked by a writer: MLflow waits for it
            pass
        except sqlite3.DatabaseError as error:  # not a database, or a damaged one
            problem = str(error)
    if problem:
        raise RegistryError(
            f"tracking URI {shown}: {db} is not an SQLite database ({problem}); point at the "
            "store the pipeline wrote (-o storage=..., -o tracking_uri=...), or move the file away"
        )


def _check_creatable(folder: Path, shown: str) -> None:
    problem = folder_problem(folder)
    if problem:
        raise RegistryError(
            f"tracking URI {shown}: cannot create the store's folder {folder} ({problem}); "
            "choose a writable location for the MLflow store"
        )


def _check_http(uri: str, shown: str, timeout: float, say: Say | None) -> None:
    uri, user, password = split_login(uri)  # urllib would take `user:password@host` for a host
    url = uri.rstrip("/") + "/health"
    status = _health(url, shown, timeout, say)
    if status != 200:
        raise RegistryError(
            f"tracking URI {shown}: {url} answered HTTP {status}; "
            "check that this URL is an MLflow tracking server"
        )
    _check_credentials(uri, shown, timeout, (user, password or "") if user else None)


def _health(url: str, shown: str, timeout: float, say: Say | None) -> int:
    """The HTTP status of `GET url`; a first try of a second, then (after saying so) the rest
    of `timeout`. No answer at all is a `RegistryError` naming the fix."""
    first = min(QUIET_WAIT_S, timeout)
    for attempt_timeout in (first, timeout - first):
        try:
            with urllib.request.urlopen(url, timeout=attempt_timeout) as response:  # noqa: S310
                return int(response.status)
        except urllib.error.HTTPError as exc:
            return int(exc.code)
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            slow = isinstance(reason, TimeoutError) or isinstance(exc, TimeoutError)
            if not slow or attempt_timeout != first or timeout <= first:
                waited = f" in {timeout:g} s" if slow else ""
                raise RegistryError(
                    f"tracking URI {shown}: no answer from {url}{waited} ({reason}); start the "
                    f"server (mlflow server --host ... --port ...) or {fix_the_uri(shown)}"
                ) from exc
            if say is not None:
                say(f"waiting up to {timeout - first:g} s more for the tracking server {shown}")
    raise AssertionError("unreachable")  # pragma: no cover


def _check_credentials(
    uri: str, shown: str, timeout: float, login: tuple[str, str] | None = None
) -> None:
    """`/health` answers anyone; one small authenticated read tells whether a server started
    with `--app-name basic-auth` accepts the credentials of MLFLOW_TRACKING_USERNAME/PASSWORD
    (or `login`, taken from the URI)."""
    url = uri.rstrip("/") + "/api/2.0/mlflow/experiments/search?max_results=1"
    request = urllib.request.Request(url)
    user, password = login or (os.environ.get(USERNAME_ENV), os.environ.get(PASSWORD_ENV))
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
        given = f"of user {user!r} were refused" if user and password else "are not set"
        raise RegistryError(
            f"tracking URI {shown}: the server asks for a login (HTTP 401) and the credentials "
            f"{given}; set MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD to a login it "
            "knows (a user:password@ in the tracking URI is moved there)"
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
            f"start the database or {fix_the_uri(uri)}"
        ) from exc


_READY: set[str] = set()


def get_client(uri: str) -> MlflowClient:
    """An `MlflowClient` bound to `uri` for both tracking and registry (no global state).
    Against a server MLflow prints `View run ... at` / `View experiment at` to stdout as each
    run ends, between the pipeline's own lines: not unless the user asks for it (the variable
    set to false; `ui` prints the experiment's link)."""
    from mlflow import MlflowClient

    os.environ.setdefault("MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT", "true")  # read per call

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
    together both run the migrations and one fails with 'table ... already exists'. A store that
    is there in a folder this process cannot write (a read-only copy or mount) is opened without
    the lock, which could not be made: nothing can create or migrate it there, and `predict`,
    which only reads it, ended in a PermissionError traceback on the lock file."""
    with ExitStack() as held:
        try:
            held.enter_context(exclusive_lock(db.with_name(db.name + ".lock")))
        except OSError:  # PermissionError, a read-only file system
            if not db.is_file():
                raise
        yield
