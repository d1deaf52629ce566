"""Errors raised by the registry layer and the bounded retry used for transient failures."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from typing import TypeVar

from adapterfleet.console import plural
from adapterfleet.disk import is_disk_full
from adapterfleet.errors import JobFailed, UserError
from adapterfleet.masking import mask

T = TypeVar("T")


class RegistryError(UserError, RuntimeError):
    """A tracking or model-registry operation failed; the message is one line with the fix."""


class RegistryTimeout(RegistryError, JobFailed, TimeoutError):
    """Waiting for registered models ran past its deadline."""

    def __init__(self, message: str, missing: Sequence[str]) -> None:
        super().__init__(message)
        self.missing: tuple[str, ...] = tuple(missing)


def safe_uri(uri: str) -> str:
    """The URI with any `user:password@` part replaced, for messages and logs."""
    return mask(uri)


def fix_the_uri(uri: str) -> str:
    """ "fix the tracking URI", naming $MLFLOW_TRACKING_URI where `uri` is the one it holds (a
    config without tracking_uri takes it, and the error named no place to fix it)."""
    given = os.environ.get("MLFLOW_TRACKING_URI", "").strip()
    if given and mask(given) == mask(uri):  # `uri` may come masked (`safe_uri`)
        return "fix the tracking URI (it comes from $MLFLOW_TRACKING_URI)"
    return "fix the tracking URI"


def failed_reading(what: str, uri: str, exc: BaseException) -> RegistryError:
    """One line for a read of the store that failed: what, where (credentials masked), the
    first 200 characters of the cause, and the fix."""
    first = " ".join(str(exc).split())[:200] or type(exc).__name__
    return RegistryError(
        f"{what} in {safe_uri(uri)} failed: {first}; check the tracking URI and the server"
    )


def is_transient(exc: BaseException) -> bool:
    """True for failures worth retrying: connection errors, HTTP 429 and 5xx; not a full disk
    (MLflow calls SQLite's `database or disk is full` TEMPORARILY_UNAVAILABLE, 503: it was
    retried for two minutes per call, a trial's end and a stopped driver's too)."""
    if is_disk_full(exc) or served_artifacts(exc):
        return False
    if isinstance(exc, ConnectionError | TimeoutError):
        return True
    try:
        from mlflow.exceptions import MlflowException
    except ImportError:  # pragma: no cover - mlflow is a hard dependency
        return False
    if isinstance(exc, MlflowException):
        status = exc.get_http_status_code()
        return status == 429 or status >= 500
    try:
        import requests
    except ImportError:  # pragma: no cover
        return False
    return isinstance(exc, requests.ConnectionError | requests.Timeout)


SERVED_ARTIFACTS = "When an mlflow-artifacts URI was supplied"  # MLflow's words, 3.x


def served_artifacts(exc: BaseException) -> bool:
    """MLflow's refusal to reach `mlflow-artifacts:/` files (an `mlflow server`'s own) through
    a tracking URI that is not the server's: a database URI of the server's store. As a
    500 it was retried for two minutes, then blamed on the server."""
    return SERVED_ARTIFACTS in str(exc)


def served_artifacts_error(what: str) -> RegistryError:
    return RegistryError(
        f"{what}: the store's artifacts are kept by an MLflow server (mlflow-artifacts:/ URIs), "
        "which only that server's address reaches; give its http(s):// URI as the tracking "
        "URI (-o tracking_uri=http://host:5000), not the database it writes to"
    )


def call_with_retry(
    fn: Callable[[], T],
    *,
    what: str,
    timeout_s: float,
    first_delay_s: float = 0.5,
    max_delay_s: float = 10.0,
) -> T:
    """Call `fn`; on a transient failure retry with capped exponential back-off until
    `timeout_s` has passed since the first attempt, then raise `RegistryError`.

    `fn` is only called again after it raised, so a call that failed is never doubled by
    this loop. Non-transient errors propagate unchanged at once.
    """
    started = time.monotonic()
    deadline = started + timeout_s
    delay = first_delay_s
    attempts = 0
    while True:
        attempts += 1
        try:
            return fn()
        except Exception as exc:
            remaining = deadline - time.monotonic()
            if served_artifacts(exc):
                raise served_artifacts_error(what) from None
            if not is_transient(exc):
                raise
            if remaining <= 0:
                first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                took = time.monotonic() - started  # one attempt may outlast the timeout
                raise RegistryError(
                    f"{what} failed after {plural(attempts, 'attempt')} over {took:.0f}s: {first}; "
                    "check that the MLflow tracking server is up and reachable"
                ) from exc
            time.sleep(min(delay, remaining))
            delay = min(delay * 2, max_delay_s)
