"""The one-line errors of the Jobs API calls, and the commands they point a person to.

A command they suggest names `--address` again only when the flag was given: an address taken
from RAY_ADDRESS is still there for the next command.
"""

from __future__ import annotations

import shlex

from adapterfleet.errors import UserError

__all__ = ["JobError", "command", "failed", "unreachable"]

UPLOAD_LIMIT = (
    "100 MiB"  # the dashboard's client_max_size (ray_constants.DASHBOARD_CLIENT_MAX_SIZE)
)


class JobError(UserError, RuntimeError):
    """A Jobs API call failed; the message is one line with the fix."""


def command(name: str, given: str | None, *args: str) -> str:
    """`adapterfleet <name> <args>`, with `--address <given>` when an address was given."""
    parts = ["adapterfleet", name, *args]
    if given:
        parts += ["--address", given]
    return shlex.join(parts)


def unreachable(address: str, reason: object) -> JobError:
    """Nothing answers at `address`."""
    return JobError(
        f"cannot reach the Ray job server at {address} ({reason}); start the cluster "
        "(ray up cluster.yaml), forward its dashboard (ray dashboard cluster.yaml) and pass "
        "--address http://127.0.0.1:8265, or fix the address"
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
