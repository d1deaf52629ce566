"""Ray Jobs API: submit a pipeline to a cluster, follow its logs, stop it, list jobs.

Token authentication (Ray >= 2.52): the token is read from `RAY_AUTH_TOKEN`, the file named by
`RAY_AUTH_TOKEN_PATH`, or `~/.ray/auth_token` (Ray's own order) and sent as an explicit
`Authorization: Bearer` header, so it works whether or not this process has `RAY_AUTH_MODE`.
The token is never printed, logged, put in an error message or passed to the job's env.

Every failure is a `JobError` whose message is one line naming the address and the fix.
Requests to the job server are preceded by a probe with a short timeout: Ray's client itself
sends its HTTP requests without any timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import shlex
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from adapterfleet.console import Say, silent
from adapterfleet.masking import mask
from adapterfleet.orchestration.job_env import PASS_ENV as PASS_ENV  # re-exported
from adapterfleet.orchestration.job_env import job_env as job_env
from adapterfleet.orchestration.job_env import logins_out
from adapterfleet.orchestration.job_errors import JobError as JobError  # re-exported
from adapterfleet.orchestration.job_errors import command, failed, not_the_job_server, unreachable
from adapterfleet.orchestration.job_info import (
    PIPELINE_KEY,
    STORE_KEY,
    ended_line,
    failure_note,
    info_of,
    running_twin,
)
from adapterfleet.orchestration.job_info import JobInfo as JobInfo  # re-exported
from adapterfleet.orchestration.job_info import jobs_note as jobs_note  # re-exported
from adapterfleet.orchestration.job_upload import (
    check_job_storage,
    config_document,
    storage_excludes,
    uploaded_config,
)
from adapterfleet.orchestration.relay import job_client_output
from adapterfleet.registry.heartbeat import ADDRESS_KEY

if TYPE_CHECKING:
    from ray.job_submission import JobSubmissionClient

TOKEN_ENV = "RAY_AUTH_TOKEN"
TOKEN_PATH_ENV = "RAY_AUTH_TOKEN_PATH"
DEFAULT_TOKEN_FILE = Path("~/.ray/auth_token")
TOKEN_FIX = (
    f"set {TOKEN_ENV}, or {TOKEN_PATH_ENV} to a file holding the token, or write it to "
    "~/.ray/auth_token (on the head: ray get-auth-token)"
)
TERMINAL = ("SUCCEEDED", "FAILED", "STOPPED")
PROBE_TIMEOUT_S = (3.0, 5.0)  # connect, read
_ADDRESS_ENV = ("RAY_API_SERVER_ADDRESS", "RAY_ADDRESS")
WAITING = "; waiting for it to end (Ctrl-C stops the waiting, not the job)"


def load_token() -> tuple[str, str] | None:
    """(token, where it came from) in Ray's order, None when there is none."""
    token = os.environ.get(TOKEN_ENV, "").strip()
    if token:
        return token, TOKEN_ENV
    path_value = os.environ.get(TOKEN_PATH_ENV)
    if path_value:
        path = Path(path_value).expanduser()
        try:
            token = path.read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise JobError(
                f"{TOKEN_PATH_ENV}={path} cannot be read ({exc.strerror or exc}); "
                "point it at the file holding the Ray token"
            ) from None
        if not token:
            raise JobError(f"{TOKEN_PATH_ENV}={path} is empty; write the Ray token into it")
        return token, TOKEN_PATH_ENV
    default = DEFAULT_TOKEN_FILE.expanduser()
    if default.is_file():
        token = default.read_text(encoding="utf-8").strip()
        if token:
            return token, str(DEFAULT_TOKEN_FILE)
    return None


def given_address(address: str | None) -> str:
    """The address as given: `address`, else RAY_API_SERVER_ADDRESS or RAY_ADDRESS."""
    address = address or next((os.environ[k] for k in _ADDRESS_ENV if os.environ.get(k)), None)
    if not address:
        raise JobError(
            "no Ray address given; pass --address http://<head>:8265 "
            "(after `ray dashboard cluster.yaml`: http://127.0.0.1:8265) or set RAY_ADDRESS"
        )
    return address.strip().rstrip("/")


def normalize_address(address: str | None) -> str:
    """`http(s)://host:port` of the job server; `host:port` gets `http://`."""
    address = given_address(address)
    if "://" not in address:
        address = f"http://{address}"
    if not address.startswith(("http://", "https://")):
        raise JobError(
            f"Ray address {address} is not an http(s) URL; pass the dashboard address, "
            "e.g. http://127.0.0.1:8265"
        )
    return address


# What `requests` says of a port that answered, but not in HTTP/1.1 (the GCS speaks gRPC)
_NOT_HTTP = ("BadStatusLine", "RemoteDisconnected")


def _probe(address: str, raw: str) -> str:
    """The cluster's authentication mode ('token', 'disabled', or '' if it does not say);
    `raw` is the address as given."""
    import requests

    try:
        response = requests.get(f"{address}/api/authentication_mode", timeout=PROBE_TIMEOUT_S)
    except requests.RequestException as exc:
        if isinstance(exc, requests.ConnectionError) and any(w in str(exc) for w in _NOT_HTTP):
            raise not_the_job_server(address, raw) from None
        reason = type(exc).__name__
        if isinstance(exc, requests.ConnectionError) and "refused" in str(exc).lower():
            reason = "connection refused"
        raise unreachable(address, reason, raw) from None
    if response.status_code != 200:
        return ""
    try:
        return str(response.json().get("authentication_mode", ""))
    except ValueError:
        return ""


@contextlib.contextmanager
def _explicit_address() -> Iterator[None]:
    """Ray lets RAY_ADDRESS / RAY_API_SERVER_ADDRESS override the address it is given
    (`ray.dashboard.utils.get_address_for_submission_client`); hide them while connecting."""
    saved = {k: os.environ.pop(k) for k in _ADDRESS_ENV if k in os.environ}
    try:
        yield
    finally:
        os.environ.update(saved)


def connect(address: str | None) -> JobSubmissionClient:
    """A `JobSubmissionClient` for `address`, authenticated when the cluster wants a token."""
    from ray.exceptions import AuthenticationError
    from ray.job_submission import JobSubmissionClient

    raw = given_address(address)
    address = normalize_address(raw)
    mode = _probe(address, raw)
    found = load_token()
    if mode == "token" and found is None:
        raise JobError(f"the Ray cluster at {address} requires an auth token; {TOKEN_FIX}")
    headers = {"Authorization": f"Bearer {found[0]}"} if found else None
    try:
        with _explicit_address():
            return JobSubmissionClient(address, headers=headers)
    except AuthenticationError:
        if found is None:
            raise JobError(
                f"the Ray cluster at {address} requires an auth token; {TOKEN_FIX}"
            ) from None
        raise JobError(
            f"the Ray cluster at {address} rejected the auth token from {found[1]}; "
            f"use the cluster's token ({TOKEN_FIX})"
        ) from None
    except ConnectionError as exc:
        raise unreachable(address, type(exc).__name__, raw) from None
    except RuntimeError as exc:  # its version check: a 404 where no job server is
        if "returned 404" in str(exc):
            raise not_the_job_server(address, raw) from None
        raise failed("connecting to the Ray job server", address, exc) from None


def submit_job(
    address: str | None,
    entrypoint: str,
    *,
    working_dir: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    submission_id: str | None = None,
    excludes: Sequence[str] = (),
    metadata: Mapping[str, str] | None = None,
) -> str:
    """Submit `entrypoint` (a shell command); returns the submission id."""
    client = connect(address)
    runtime_env: dict[str, Any] = {}
    if working_dir is not None:
        folder = Path(working_dir).expanduser().resolve()
        if not folder.is_dir():
            raise JobError(f"working_dir {folder} is not a folder; pass the project folder")
        runtime_env["working_dir"] = str(folder)
        if excludes:
            runtime_env["excludes"] = list(excludes)
    if env:
        runtime_env["env_vars"] = dict(env)
    try:
        with job_client_output():  # not its INFO lines: "Uploading package ..."
            return client.submit_job(
                entrypoint=entrypoint,
                runtime_env=runtime_env or None,
                submission_id=submission_id,
                metadata=dict(metadata or {}),
            )
    except (RuntimeError, ValueError, OSError) as exc:
        raise failed("submitting the job", client.get_address(), exc, address) from None


def pipeline_entrypoint(config_rel: str, overrides: Sequence[str] = ()) -> str:
    """`adapterfleet run <config> --set k=v ...`, shell-quoted."""
    parts = ["adapterfleet", "run", config_rel]
    for item in overrides:
        parts += ["--set", item]
    return shlex.join(parts)


def make_submission_id(name: str) -> str:
    """`adapterfleet-<name>-<UTC yyyymmdd-hhmmss>-<4 hex>`: readable, sortable, unique."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    return f"adapterfleet-{name}-{stamp}-{secrets.token_hex(2)}"


def submit_pipeline(
    config_path: str | Path,
    address: str | None,
    overrides: Sequence[str] = (),
    working_dir: str | Path = ".",
    extra_env: Mapping[str, str] | None = None,
    wait: bool = False,
    say: Say = silent,
) -> str:
    """Upload `working_dir` and run `adapterfleet run <config>` on the cluster.

    The config must lie inside `working_dir`, and its `storage` be an absolute path (the
    cluster's shared folder); when that lies inside `working_dir`, it is left out of the
    upload. With `wait`, block until the job ends and raise `JobError` unless it SUCCEEDED.
    `say` hears the submission id once the job is submitted (before the waiting); it is also
    returned.
    """
    folder = Path(working_dir).expanduser().resolve()
    config, config_rel = uploaded_config(Path(config_path).expanduser(), folder)
    document = config_document(config, overrides)
    check_job_storage(document)
    excludes = storage_excludes(document.get("storage"), folder)
    env = job_env(extra_env)
    overrides = logins_out(overrides, env)
    name, store = str(document["name"]), job_store(document, env)
    refuse_running_twin(address, name, store)
    job_id = submit_job(
        address,
        pipeline_entrypoint(config_rel, overrides),
        working_dir=folder,
        env=env,
        submission_id=make_submission_id(name),
        excludes=excludes,
        metadata={PIPELINE_KEY: name, "adapterfleet.config": config_rel, STORE_KEY: store}
        | {ADDRESS_KEY: address or os.environ.get("RAY_ADDRESS", "")},  # for `stop`'s hint
    )
    say(f"submitted {job_id}" + (WAITING if wait else ""))
    if wait:
        status = wait_for_job(address, job_id)
        if status != "SUCCEEDED":
            raise JobError(ended_line(job_info(address, job_id), address))
    return job_id


def job_store(document: Mapping[str, Any], env: Mapping[str, str]) -> str:
    """Where a job's pipeline writes, as its metadata records it: its tracking URI (the
    config's, else the one the job's environment passes; login masked) and storage."""
    tracking = document.get("tracking_uri") or env.get("MLFLOW_TRACKING_URI") or ""
    return mask(f"{tracking} {document.get('storage') or ''}".strip())


def refuse_running_twin(address: str | None, name: str, store: str) -> None:
    """A job of the same pipeline on the same store still pending or running is refused here:
    sent all the same, it failed on the cluster (`another adapterfleet driver runs this
    pipeline's sweep`) after `submit` had said `submitted` and exited 0."""
    client = connect(address)
    try:
        twin = running_twin(client.list_jobs(), name, store)
    except RuntimeError as exc:
        raise failed("listing jobs", client.get_address(), exc, address) from None
    if twin is not None:
        job = twin.submission_id or twin.job_id
        raise JobError(
            f"pipeline {name}: job {job} is {str(twin.status).lower()} on this cluster with the "
            f"same store; a second would be refused there by its driver; follow it "
            f"({command('logs', address, job, '--follow')}) or stop it "
            f"({command('stop', address, job)}) first"
        )


def job_info(address: str | None, job_id: str) -> JobInfo:
    """The job's status and, for a failed one, the tail of its log (`message`)."""
    client = connect(address)
    try:
        return info_of(client.get_job_info(job_id))
    except RuntimeError as exc:
        raise failed(f"job {job_id}", client.get_address(), exc, address) from None


def job_note(address: str | None, job_id: str) -> str | None:
    """A line on why the job failed when its log alone does not say it (adapterfleet missing
    on the cluster; a pipeline's driver killed: how to go on), for `logs`; None otherwise."""
    return failure_note(job_info(address, job_id), address)


def job_status(address: str | None, job_id: str) -> str:
    client = connect(address)
    try:
        return str(client.get_job_status(job_id))
    except RuntimeError as exc:
        raise failed(f"job {job_id}", client.get_address(), exc, address) from None


def wait_for_job(
    address: str | None, job_id: str, timeout_s: float | None = None, poll_s: float = 1.0
) -> str:
    """Poll until the job is SUCCEEDED, FAILED or STOPPED; returns that status."""
    client = connect(address)
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while True:
        try:
            status = str(client.get_job_status(job_id))
        except RuntimeError as exc:
            raise failed(f"job {job_id}", client.get_address(), exc, address) from None
        if status in TERMINAL:
            return status
        if deadline is not None and time.monotonic() > deadline:
            raise JobError(f"job {job_id} is still {status} after {timeout_s:g}s")
        time.sleep(poll_s)


def job_logs(address: str | None, job_id: str, follow: bool = False) -> str | Iterator[str]:
    """All logs so far; with `follow`, an iterator of chunks until the job ends."""
    client = connect(address)
    if follow:
        return _follow(client, job_id, address)
    try:
        return client.get_job_logs(job_id)
    except RuntimeError as exc:
        raise failed(f"logs of job {job_id}", client.get_address(), exc, address) from None


def _follow(client: JobSubmissionClient, job_id: str, given: str | None) -> Iterator[str]:
    loop = asyncio.new_event_loop()
    stream = client.tail_job_logs(job_id)
    try:
        with job_client_output():
            while True:
                try:
                    yield loop.run_until_complete(stream.__anext__())
                except StopAsyncIteration:
                    return
                except RuntimeError as exc:
                    address = client.get_address()
                    raise failed(f"logs of job {job_id}", address, exc, given) from None
    finally:  # Ctrl-C left `__anext__` running: cancelled first, `aclose` raised in a traceback
        if pending := asyncio.all_tasks(loop):
            for task in pending:
                task.cancel()
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        with contextlib.suppress(RuntimeError):
            loop.run_until_complete(stream.aclose())
        loop.close()


def stop_job(address: str | None, job_id: str) -> bool:
    """Ask the job to stop; False when it had already ended."""
    client = connect(address)
    try:
        return bool(client.stop_job(job_id))
    except RuntimeError as exc:
        raise failed(f"stopping job {job_id}", client.get_address(), exc, address) from None


def list_jobs(address: str | None) -> list[JobInfo]:
    """Every job the cluster knows, oldest first."""
    client = connect(address)
    try:
        details = client.list_jobs()
    except RuntimeError as exc:
        raise failed("listing jobs", client.get_address(), exc, address) from None
    jobs = [info_of(d) for d in details]
    return sorted(jobs, key=lambda j: j.start_time or 0.0)
