"""One job as the cluster describes it, and what a failed job's log says of its end.

Ray keeps the tail of a failed job's log in the job's `message` ("Job entrypoint command failed
with exit code 2, last available logs (truncated to 20,000 chars): ..."). Where adapterfleet's
CLI refused something on the cluster, its last `error: ...` line there says what.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from adapterfleet.orchestration.job_errors import command

__all__ = ["JobInfo", "ended_line", "info_of", "last_error"]

_ERROR_LINE = re.compile(r"^error: (.*\S)", re.MULTILINE)  # as the CLI says a UserError
_COLOUR = re.compile(r"\x1b\[[0-9;]*m")


@dataclass(frozen=True)
class JobInfo:
    """One job on the cluster, without its runtime env (which may hold credentials)."""

    job_id: str
    status: str
    entrypoint: str
    message: str  # for a failed job, the tail of its log
    start_time: float | None  # seconds since the epoch
    end_time: float | None


def info_of(details: Any) -> JobInfo:
    """The `JobInfo` of Ray's `JobDetails`."""
    return JobInfo(
        job_id=str(details.submission_id or details.job_id),
        status=str(details.status),
        entrypoint=str(details.entrypoint or ""),
        message=str(details.message or ""),
        start_time=details.start_time / 1000 if details.start_time else None,
        end_time=details.end_time / 1000 if details.end_time else None,
    )


def last_error(log: str) -> str | None:
    """The text of the last `error: ...` line of `log`, None when it has none."""
    found = _ERROR_LINE.findall(_COLOUR.sub("", log))
    return found[-1] if found else None


def ended_line(info: JobInfo, given: str | None) -> str:
    """What `submit --wait` says of a job that ended other than SUCCEEDED: its own last
    error line when it has one; `given` is the `--address` flag, named in the logs command."""
    logs = command("logs", given, info.job_id)
    said = last_error(info.message) if info.status == "FAILED" else None
    if said:
        return f"job {info.job_id} ended {info.status} (its logs: {logs}); it said: {said}"
    return f"job {info.job_id} ended {info.status}; see its logs: {logs}"
