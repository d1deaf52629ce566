"""Read-only queries on an MLflow tracking server through its REST API, for `status`.

Importing MLflow's client costs about 2.6 s in a fresh process on a 2-core machine, more than
`adapterfleet status` may take in all; the reads status needs (the experiment with its tags,
its active runs, the registered versions of a prefix with their aliases, which of their runs
`mlflow gc` purged) are a few HTTP requests, sent here with the standard library only.

They send what MLflow's client sends for the same settings: basic auth from
MLFLOW_TRACKING_USERNAME / MLFLOW_TRACKING_PASSWORD (or `~/.mlflow/credentials`, or the URI's
`user:password@`), a bearer token from MLFLOW_TRACKING_TOKEN; for https
MLFLOW_TRACKING_SERVER_CERT_PATH, else REQUESTS_CA_BUNDLE / CURL_CA_BUNDLE, else the system's CA
certificates (requests would use certifi's: a certificate only that bundle knows fails here and
goes to the client), MLFLOW_TRACKING_INSECURE_TLS and MLFLOW_TRACKING_CLIENT_CERT_PATH. No
answer, a refused login
or a missing permission is one `RegistryError` line naming the URI and the fix. Whatever they do
not know raises `Unreadable`, and callers ask MLflow's client instead: an auth plugin
(MLFLOW_TRACKING_AUTH, MLFLOW_TRACKING_AWS_SIGV4), a workspace (MLFLOW_WORKSPACE), a TLS
handshake urllib cannot complete, an answer that is not MLflow's JSON, or an HTTP error the
client retries (429, 5xx). Nothing is ever written.
"""

from __future__ import annotations

import base64
import configparser
import http.client
import json
import os
import ssl
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from adapterfleet.registry.errors import RegistryError, fix_the_uri, safe_uri
from adapterfleet.registry.info import ModelVersionInfo
from adapterfleet.registry.sqlite_read import Unreadable
from adapterfleet.registry.tags import quote

API = "/api/2.0/mlflow/"
RUNS_PAGE = 1000  # runs per `runs/search` page
RUN_IDS_CHUNK = 200  # run ids per `run_id IN (...)` filter
HISTORY_PAGE = 1000  # values per `metrics/get-history` page
MODELS_PAGE = 1000  # the server's largest page of `registered-models/search`
VERSIONS_PAGE = 10_000
DEFAULT_TIMEOUT_S = 120.0  # MLflow's own MLFLOW_HTTP_REQUEST_TIMEOUT default
_NOT_FOUND = "RESOURCE_DOES_NOT_EXIST"
_PLUGINS = ("MLFLOW_TRACKING_AUTH", "MLFLOW_TRACKING_AWS_SIGV4", "MLFLOW_WORKSPACE")
_TRUE = ("true", "1")

RunRow = tuple[str, str, int, dict[str, str], dict[str, float]]


def is_http(uri: str) -> bool:
    """True for the `http://` and `https://` tracking URIs this module reads."""
    return urllib.parse.urlsplit(uri).scheme.lower() in ("http", "https")


class _NotFound(Unreadable):
    """The server answered 404 RESOURCE_DOES_NOT_EXIST (unexpected but for the experiment)."""


@contextmanager
def _understood(what: str) -> Iterator[None]:
    """Fields of an unexpected type or shape in an answer: `Unreadable`, not a crash."""
    try:
        yield
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise Unreadable(f"{what}: {type(exc).__name__}: {exc}") from exc


@dataclass(frozen=True)
class Server:
    """Where and how to send the requests: base URL (no credentials), headers, TLS."""

    base: str
    shown: str  # the URI for messages, credentials masked
    headers: dict[str, str] = field(default_factory=dict)
    context: ssl.SSLContext | None = None
    user: str | None = None
    timeout_s: float = DEFAULT_TIMEOUT_S

    @classmethod
    def from_uri(cls, uri: str, environ: Mapping[str, str] | None = None) -> Server:
        env = os.environ if environ is None else environ
        if not is_http(uri):
            raise Unreadable(f"not an http(s) URI: {safe_uri(uri)}")
        for name in _PLUGINS:
            value = env.get(name, "").strip().lower()
            if value and (name == "MLFLOW_WORKSPACE" or value not in ("false", "0")):
                raise Unreadable(f"{name} is set: MLflow's client handles it")
        parts = urllib.parse.urlsplit(uri)
        netloc = parts.netloc.rpartition("@")[2]
        base = urllib.parse.urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", ""))
        user, password = _credentials(env, parts)
        headers = {"Accept": "application/json"}
        if user and password:
            login = base64.b64encode(f"{user}:{password}".encode()).decode()
            headers["Authorization"] = f"Basic {login}"
        elif env.get("MLFLOW_TRACKING_TOKEN"):
            headers["Authorization"] = f"Bearer {env['MLFLOW_TRACKING_TOKEN']}"
        context = _tls_context(env) if parts.scheme.lower() == "https" else None
        try:
            timeout = float(env.get("MLFLOW_HTTP_REQUEST_TIMEOUT") or DEFAULT_TIMEOUT_S)
        except ValueError:
            timeout = DEFAULT_TIMEOUT_S
        return cls(base, safe_uri(uri), headers, context, user if password else None, timeout)

    def call(
        self,
        path: str,
        query: Mapping[str, Any] | None = None,
        body: Mapping[str, Any] | None = None,
    ) -> dict[str, Any]:
        """GET `API + path` with `query` (or POST `body` as JSON); the decoded JSON object."""
        url = self.base + API + path
        if query:
            url += "?" + urllib.parse.urlencode(query, doseq=True)
        data = None if body is None else json.dumps(body).encode()
        headers = dict(self.headers)
        if data is not None:
            headers["Content-Type"] = "application/json"
        request = urllib.request.Request(url, data=data, headers=headers)
        try:
            with urllib.request.urlopen(  # noqa: S310 - http(s) only, checked in from_uri
                request, timeout=self.timeout_s, context=self.context
            ) as response:
                raw = response.read()
        except urllib.error.HTTPError as exc:
            raise self._http_error(exc.code, exc.read()) from exc
        except urllib.error.URLError as exc:
            if isinstance(exc.reason, ssl.SSLError):  # let the client try with its own TLS
                raise Unreadable(f"TLS: {exc.reason}") from exc
            raise self._no_answer(exc.reason) from exc
        except ssl.SSLError as exc:
            raise Unreadable(f"TLS: {exc}") from exc
        except http.client.HTTPException as exc:  # a broken answer: the client retries
            raise Unreadable(f"{path}: {type(exc).__name__}") from exc
        except (TimeoutError, OSError) as exc:
            raise self._no_answer(exc) from exc
        try:
            answer = json.loads(raw)
        except (UnicodeDecodeError, ValueError) as exc:
            raise Unreadable(f"{path}: not JSON") from exc
        if not isinstance(answer, dict):
            raise Unreadable(f"{path}: not a JSON object")
        return answer

    def _no_answer(self, reason: object) -> RegistryError:
        return RegistryError(
            f"tracking URI {self.shown}: no answer from {self.base}{API} ({reason}); start the "
            f"server (mlflow server --host ... --port ...) or {fix_the_uri(self.shown)}"
        )

    def _http_error(self, status: int, raw: bytes) -> Exception:
        if status == 401:
            given = "were refused" if self.headers.get("Authorization") else "are not set"
            return RegistryError(
                f"tracking URI {self.shown}: the server asks for a login (HTTP 401) and the "
                f"credentials {given}; set MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD"
            )
        if status == 403:
            who = f"user {self.user!r}" if self.user else "this login"
            return RegistryError(
                f"tracking URI {self.shown}: {who} may not read this experiment or model "
                "(HTTP 403); ask the server's admin for READ permission or use another account"
            )
        try:
            code = json.loads(raw).get("error_code")
        except (ValueError, AttributeError):
            code = None
        if status == 404 and code == _NOT_FOUND:
            return _NotFound()
        return Unreadable(f"HTTP {status} {code or ''}".strip())


def _credentials(env: Mapping[str, str], parts: urllib.parse.SplitResult) -> tuple[str, str]:
    """Username and password as MLflow's client picks them: the environment, else the
    `[mlflow]` section of ~/.mlflow/credentials; else the URI's own `user:password@`."""
    user = env.get("MLFLOW_TRACKING_USERNAME") or ""
    password = env.get("MLFLOW_TRACKING_PASSWORD") or ""
    if not (user and password):
        path = Path(os.path.expanduser("~/.mlflow/credentials"))
        if path.is_file():
            config = configparser.ConfigParser()
            try:
                config.read(path)
            except configparser.Error as exc:
                raise Unreadable(f"{path}: {exc}") from exc
            if config.has_section("mlflow"):
                user = user or config.get("mlflow", "mlflow_tracking_username", fallback="")
                password = password or config.get("mlflow", "mlflow_tracking_password", fallback="")
    if not (user and password) and parts.username is not None:
        user = urllib.parse.unquote(parts.username)
        password = urllib.parse.unquote(parts.password or "")
    return user, password


def _tls_context(env: Mapping[str, str]) -> ssl.SSLContext:
    insecure = env.get("MLFLOW_TRACKING_INSECURE_TLS", "").strip().lower() in _TRUE
    server_cert = env.get("MLFLOW_TRACKING_SERVER_CERT_PATH")
    if insecure and server_cert:
        raise Unreadable("both MLFLOW_TRACKING_INSECURE_TLS and a server certificate are set")
    bundle = server_cert or env.get("REQUESTS_CA_BUNDLE") or env.get("CURL_CA_BUNDLE")
    try:
        if insecure:
            context = ssl.create_default_context()
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        elif bundle and Path(bundle).is_dir():
            context = ssl.create_default_context(capath=bundle)
        else:
            context = ssl.create_default_context(cafile=bundle or None)
        client_cert = env.get("MLFLOW_TRACKING_CLIENT_CERT_PATH")
        if client_cert:
            context.load_cert_chain(client_cert)
    except (OSError, ssl.SSLError) as exc:
        raise Unreadable(f"TLS settings: {exc}") from exc
    return context


# --------------------------------------------------------------------------- the three reads


def experiment(server: Server, name: str) -> tuple[str, dict[str, str]] | None:
    """(id, tags) of the active experiment `name`; None when absent or deleted."""
    try:
        answer = server.call("experiments/get-by-name", {"experiment_name": name})
    except _NotFound:
        return None
    found = answer.get("experiment")
    if not isinstance(found, dict) or "experiment_id" not in found:
        raise Unreadable("experiments/get-by-name: no experiment in the answer")
    if found.get("lifecycle_stage", "active") == "deleted":
        return None
    return str(found["experiment_id"]), _pairs(found.get("tags"), "key", "value")


def active_runs(
    server: Server, experiment_id: str, tag_keys: Sequence[str], page: int = RUNS_PAGE
) -> list[RunRow]:
    """(run id, status, start ms, the `tag_keys` tags, latest metrics) of every active run of
    the experiment, oldest first: what `sqlite_read.active_runs` returns for a SQLite store."""
    keep = frozenset(tag_keys)
    body: dict[str, Any] = {
        "experiment_ids": [experiment_id],
        "run_view_type": "ACTIVE_ONLY",
        "max_results": page,
        "order_by": ["attributes.start_time ASC"],
    }
    out: list[RunRow] = []
    for answer in _pages(lambda token: server.call("runs/search", body=_with(body, token))):
        with _understood("runs/search"):
            out += [_run_row(run, keep) for run in _list(answer, "runs")]
    return out


def best_value(server: Server, run_id: str, key: str, highest: bool) -> float | None:
    """What `sqlite_read.best_values` gives for one run: the highest (or lowest) value it
    logged for metric `key`, NaN left out; None when it logged none."""
    query = {"run_id": run_id, "metric_key": key, "max_results": HISTORY_PAGE}
    values: list[float] = []
    for answer in _pages(lambda token: server.call("metrics/get-history", _with(query, token))):
        with _understood("metrics/get-history"):
            values += [_number(m) for m in _list(answer, "metrics")]
    values = [v for v in values if v == v]
    return (max if highest else min)(values) if values else None


def existing_runs(server: Server, run_ids: Sequence[str], page: int = RUNS_PAGE) -> set[str]:
    """What `sqlite_read.existing_runs` gives for a server: the ids among `run_ids` of runs it
    holds in any experiment, deleted ones too (every experiment, then their runs by id)."""
    listing: dict[str, Any] = {"view_type": 3, "max_results": MODELS_PAGE}  # 3: ViewType.ALL
    experiments: list[str] = []
    for answer in _pages(lambda t: server.call("experiments/search", body=_with(listing, t))):
        with _understood("experiments/search"):
            experiments += [str(e["experiment_id"]) for e in _list(answer, "experiments")]
    found: set[str] = set()
    for start in range(0, len(run_ids), RUN_IDS_CHUNK) if experiments else ():
        listed = ", ".join(quote(run) for run in run_ids[start : start + RUN_IDS_CHUNK])
        body: dict[str, Any] = {"experiment_ids": experiments, "run_view_type": "ALL"}
        body.update(filter=f"attributes.run_id IN ({listed})", max_results=page)
        for answer in _pages(lambda t, b=body: server.call("runs/search", body=_with(b, t))):
            with _understood("runs/search"):
                found |= {_run_row(run, frozenset())[0] for run in _list(answer, "runs")}
    return found


def _run_row(run: Mapping[str, Any], keep: frozenset[str]) -> RunRow:
    info, data = run["info"], run.get("data") or {}
    run_id = info.get("run_id") or info.get("run_uuid")
    if not run_id:
        raise Unreadable("runs/search: a run without an id")
    tags = {k: v for k, v in _pairs(data.get("tags"), "key", "value").items() if k in keep}
    metrics = {k: _number(v) for k, v in _pairs(data.get("metrics"), "key", None).items()}
    start = int(info.get("start_time") or 0)
    return str(run_id), str(info["status"]), start, tags, metrics


def model_versions(
    server: Server, head: str, page: int = VERSIONS_PAGE, models_page: int = MODELS_PAGE
) -> dict[str, tuple[list[ModelVersionInfo], dict[str, int]]]:
    """For every registered model whose name starts with `head`: its live versions and its
    aliases (alias -> version); what `sqlite_read.model_versions` returns for a SQLite store."""
    like = f"name LIKE {quote(head + '%')}"  # '_' is a wildcard: names are checked below
    out: dict[str, tuple[list[ModelVersionInfo], dict[str, int]]] = {}
    query: dict[str, Any] = {"filter": like, "max_results": models_page}
    for answer in _pages(lambda t: server.call("registered-models/search", _with(query, t))):
        with _understood("registered-models/search"):
            for model in _list(answer, "registered_models"):
                name = str(model["name"])
                if name.startswith(head):
                    aliases = _pairs(model.get("aliases"), "alias", "version")
                    out[name] = ([], {a: int(v) for a, v in aliases.items()})
    versions: dict[str, Any] = {"filter": like, "max_results": page}
    for answer in _pages(lambda t: server.call("model-versions/search", _with(versions, t))):
        with _understood("model-versions/search"):
            for version in _list(answer, "model_versions"):
                name = str(version["name"])
                if name in out:
                    out[name][0].append(_version_info(version, name, out[name][1]))
    return out


def _version_info(
    version: Mapping[str, Any], name: str, aliases: Mapping[str, int]
) -> ModelVersionInfo:
    number = int(version["version"])
    created = version.get("creation_timestamp")
    return ModelVersionInfo(
        name=name,
        version=number,
        source=str(version.get("source") or ""),
        run_id=version.get("run_id") or None,
        aliases=tuple(sorted(a for a, v in aliases.items() if v == number)),
        tags=_pairs(version.get("tags"), "key", "value"),
        created_ms=int(created) if created is not None else None,
    )


# --------------------------------------------------------------------------- the JSON


def _with(request: Mapping[str, Any], token: str | None) -> dict[str, Any]:
    return {**request, "page_token": token} if token else dict(request)


def _pages(fetch: Any) -> Any:
    """The answers of a paged search, following `next_page_token`."""
    token: str | None = None
    seen: set[str] = set()
    while True:
        answer = fetch(token)
        yield answer
        token = answer.get("next_page_token") or None
        if token is None:
            return
        if not isinstance(token, str) or token in seen:
            raise Unreadable("a page token that does not move on")
        seen.add(token)


def _list(answer: Mapping[str, Any], key: str) -> list[dict[str, Any]]:
    items = answer.get(key, [])  # an empty page leaves the field out
    if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
        raise Unreadable(f"{key}: not a list of objects")
    return items


def _pairs(items: Any, key: str, value: str | None) -> dict[str, Any]:
    """[{key: k, value: v}, ...] as {k: str(v)} (`value` None: the whole item as the value)."""
    if items is None:
        return {}
    if not isinstance(items, list):
        raise Unreadable(f"expected a list of {key}s")
    out: dict[str, Any] = {}
    for item in items:
        if not isinstance(item, dict) or key not in item:
            raise Unreadable(f"expected a list of {key}s")
        out[str(item[key])] = item if value is None else str(item.get(value, ""))
    return out


def _number(metric: Mapping[str, Any]) -> float:
    """A metric's value: a JSON number, or the strings protobuf writes for NaN and infinities."""
    value = metric.get("value", 0.0)  # absent reads as the proto default, as in the client
    try:
        return float(value)
    except (TypeError, ValueError) as exc:
        raise Unreadable(f"metric value {value!r}") from exc
