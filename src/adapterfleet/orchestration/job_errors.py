"""The one-line errors of the Jobs API calls, and the commands they point a person to.

A command they suggest names `--address` again only when the flag was given: an address taken
from RAY_ADDRESS is still there for the next command.
"""

from __future__ import annotations

import shlex
from urllib.parse import urlsplit

from adapterfleet.errors import UserError

__all__ = ["JobError", "command", "failed", "not_the_job_server", "unreachable"]

UPLOAD_LIMIT = (
    "100 MiB"  # the dashboard's client_max_size (ray_constants.DASHBOARD_CLIENT_MAX_SIZE)
)
DASHBOARD_PORT = 8265  # `ray start --dashboard-port`'s default; the GCS's is 6379
START_FIX = (
    "start the cluster (ray up cluster.yaml), forward its dashboard (ray dashboard cluster.yaml) "
    "and pass --address http://127.0.0.1:8265, or fix the address"
)


class JobError(UserError, RuntimeError):
    """A Jobs API call failed; the message is one line with the fix."""


def command(name: str, given: str | None, *args: str) -> str:
    """`adapterfleet <name> <args>`, with `--address <given>` when an address was given."""
    parts = ["adapterfleet", name, *args]
    if given:
        parts += ["--address", given]
    return shlex.join(parts)


def _dashboard(address: str) -> str:
    """The job server's address on the host of `address`, at the dashboard's default port."""
    return f"http://{urlsplit(address).hostname or '<head>'}:{DASHBOARD_PORT}"


def _port(address: str) -> int | None:
    try:
        return urlsplit(address if "://" in address else f"http://{address}").port
    except ValueError:  # a port that is no number
        return None


def _written_as_gcs(raw: str) -> bool:
    """`host:port` without a scheme, at another port than the dashboard's: how a GCS address
    is written (`ray start --address`, ray.init's RAY_ADDRESS)."""
    if "://" in raw:
        return False
    try:
        return urlsplit(f"http://{raw}").port not in (None, DASHBOARD_PORT)
    except ValueError:  # a port that is no number
        return False


def unreachable(address: str, reason: object, raw: str = "") -> JobError:
    """Nothing answers at `address`; `raw` is the address as given."""
    fix = START_FIX
    port = _port(address)
    if port not in (None, DASHBOARD_PORT) and not _written_as_gcs(raw):  # not the default's
        fix = (
            f"check that the cluster runs and that its dashboard listens on port {port} (ray "
            f"start --head --dashboard-port {port}; {DASHBOARD_PORT} by default), or fix the "
            "address"
        )
    if _written_as_gcs(raw):
        fix = (
            f"if {raw} is the cluster's GCS address (the one ray start --address takes), "
            f"pass the dashboard's instead: {_dashboard(address)} by default (ray start "
            f"prints it); else {fix}"
        )
    return JobError(f"cannot reach the Ray job server at {address} ({reason}); {fix}")


def not_the_job_server(address: str, raw: str) -> JobError:
    """Something answers at `address` (`raw` as given), but not as Ray's job server."""
    return JobError(
        f"Ray address {raw or address} answers, but it is not the Ray job server (the "
        "cluster's GCS address, port 6379 by default, which ray start --address takes, "
        f"answers so); pass the dashboard's address: {_dashboard(address)} by default "
        "(ray start prints it)"
    )


def failed(what: str, address: str, exc: BaseException, given: str | None = None) -> JobError:
    """`what` at `address` failed with `exc` (the job client's error); `given`: the
    `--address` flag, named again in the command the message suggests."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    if "status code 413" in text:
        return JobError(
            f"{what} at {address}: the working_dir package is larger than the {UPLOAD_LIMIT} "
            "the job server accepts; add large folders to .rayignore or .gitignore"
        )
    if "status code 404" in text:
        return JobError(f"{what} at {address}: not found; list the jobs: {command('jobs', given)}")
    return JobError(f"{what} at {address} failed: {text[:300]}")
