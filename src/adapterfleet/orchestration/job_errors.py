"""The one-line errors of the Jobs API calls, each naming the address and the fix."""

from __future__ import annotations

from adapterfleet.errors import UserError

__all__ = ["JobError", "failed", "unreachable"]

UPLOAD_LIMIT = (
    "100 MiB"  # the dashboard's client_max_size (ray_constants.DASHBOARD_CLIENT_MAX_SIZE)
)


class JobError(UserError, RuntimeError):
    """A Jobs API call failed; the message is one line with the fix."""


def unreachable(address: str, reason: object) -> JobError:
    """Nothing answers at `address`."""
    return JobError(
        f"cannot reach the Ray job server at {address} ({reason}); start the cluster "
        "(ray up cluster.yaml), forward its dashboard (ray dashboard cluster.yaml) and pass "
        "--address http://127.0.0.1:8265, or fix the address"
    )


def failed(what: str, address: str, exc: BaseException) -> JobError:
    """`what` at `address` failed with `exc` (the job client's error)."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    if "status code 413" in text:
        return JobError(
            f"{what} at {address}: the working_dir package is larger than the {UPLOAD_LIMIT} "
            "the job server accepts; add large folders to .rayignore or .gitignore"
        )
    if "status code 404" in text:
        return JobError(f"{what} at {address}: not found; list the jobs with list_jobs")
    return JobError(f"{what} at {address} failed: {text[:300]}")
