"""One job as the cluster describes it, and what a failed job's log says of its end.

Ray keeps the tail of a failed job's log in the job's `message` ("Job entrypoint command failed
with exit code 2, last available logs (truncated to 20,000 chars): ..."). Where adapterfleet's
CLI refused something on the cluster, its last `error: ...` line there says what; where the
shell found no `adapterfleet` to run (`/bin/sh: 1: adapterfleet: not found`), adapterfleet is
not installed where the job runs, which `submit --wait`, `logs` and `jobs` say with the fix.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from adapterfleet.console import plural
from adapterfleet.orchestration.job_errors import command

__all__ = [
    "PIPELINE_KEY",
    "STORE_KEY",
    "JobInfo",
    "ended_line",
    "failure_note",
    "info_of",
    "jobs_note",
    "last_error",
    "running_twin",
]
# what `submit` records in a job's metadata: the pipeline's name, and the store it writes to
PIPELINE_KEY = "adapterfleet.pipeline"
STORE_KEY = "adapterfleet.store"

_ERROR_LINE = re.compile(r"^error: (.*\S)", re.MULTILINE)  # as the CLI says a UserError
_COLOUR = re.compile(r"\x1b\[[0-9;]*m")
# sh (dash): "/bin/sh: 1: adapterfleet: not found"; bash: "bash: adapterfleet: command not found"
_NOT_FOUND = re.compile(r"\badapterfleet: (?:command )?not found$", re.MULTILINE)
NOT_INSTALLED = (
    "adapterfleet is not installed on the cluster's nodes, or not on the PATH the Ray head was "
    "started with (the job's shell said 'adapterfleet: not found'); install it in the Python "
    "environment that runs ray start on every node, as cluster.yaml's setup_commands do, and "
    "start Ray again from there"
)


@dataclass(frozen=True)
class JobInfo:
    """One job on the cluster, without its runtime env (which may hold credentials)."""

    job_id: str
    status: str
    entrypoint: str
    message: str  # for a failed job, the tail of its log
    start_time: float | None  # seconds since the epoch
    end_time: float | None
    # a process that joined the cluster itself (`run --address`, ray.init), not a submitted job:
    # Ray lists it too, SUCCEEDED once it disconnects, whatever its exit status was
    driver: bool = False


def info_of(details: Any) -> JobInfo:
    """The `JobInfo` of Ray's `JobDetails`."""
    return JobInfo(
        job_id=str(details.submission_id or details.job_id),
        status=str(details.status),
        entrypoint=str(details.entrypoint or ""),
        message=str(details.message or ""),
        start_time=details.start_time / 1000 if details.start_time else None,
        end_time=details.end_time / 1000 if details.end_time else None,
        driver=str(getattr(details, "type", "")).endswith("DRIVER"),
    )


def last_error(log: str) -> str | None:
    """The text of the last `error: ...` line of `log`, None when it has none."""
    found = _ERROR_LINE.findall(_COLOUR.sub("", log))
    return found[-1] if found else None


def not_installed(info: JobInfo) -> bool:
    """Whether the job failed because its shell found no `adapterfleet` to run."""
    return info.status == "FAILED" and _NOT_FOUND.search(info.message) is not None


def failure_note(info: JobInfo, given: str | None = None) -> str | None:
    """The line `logs` adds for a job that found no adapterfleet on the cluster, or for a
    pipeline's job that failed without an error of its own (its driver killed, its node lost):
    the command that continues it; `given` is the `--address` flag, named in that command."""
    if not_installed(info):
        return f"job {info.job_id} failed: {NOT_INSTALLED}"
    return killed_note(info, given)


def killed_note(info: JobInfo, given: str | None) -> str | None:
    """`job ... ended FAILED with no error of its own ...; ... adapterfleet submit ...` for a
    pipeline's job (`adapterfleet run <config> --set ...`) that said no `error:` line."""
    if info.status != "FAILED" or last_error(info.message) is not None:
        return None
    if "Traceback (most recent call last)" in info.message:  # it failed, not killed
        return None
    try:
        parts = shlex.split(info.entrypoint)
    except ValueError:
        return None
    if parts[:2] != ["adapterfleet", "run"] or len(parts) < 3:
        return None
    again = command("submit", given, *parts[2:])
    return (
        f"job {info.job_id} ended FAILED with no error of its own (its driver killed, or its "
        "node lost); submitting it again from the folder it was sent from goes on from what "
        f"it registered and its trials' checkpoints: {again}"
    )


def jobs_note(jobs: Sequence[JobInfo]) -> str | None:
    """The line `jobs` adds under its table when jobs found no adapterfleet on the cluster."""
    missing = [job.job_id for job in jobs if not_installed(job)]
    if not missing:
        return None
    named = ", ".join(missing[-3:]) + (f" and {len(missing) - 3} more" if len(missing) > 3 else "")
    return f"{plural(len(missing), 'job')} failed ({named}): {NOT_INSTALLED}"


def ended_line(info: JobInfo, given: str | None) -> str:
    """What `submit --wait` says of a job that ended other than SUCCEEDED: adapterfleet
    missing on the cluster, else its own last error line when it has one; `given` is the
    `--address` flag, named in the logs command."""
    if not_installed(info):
        return f"job {info.job_id} ended FAILED: {NOT_INSTALLED}"
    logs = command("logs", given, info.job_id)
    said = last_error(info.message) if info.status == "FAILED" else None
    if said:
        return f"job {info.job_id} ended {info.status} (its logs: {logs}); it said: {said}"
    if killed := killed_note(info, given):
        return f"{killed} (its logs: {logs})"
    return f"job {info.job_id} ended {info.status}; see its logs: {logs}"


def running_twin(jobs: Sequence[Any], pipeline: str, store: str) -> Any | None:
    """The PENDING or RUNNING job (Ray's `JobDetails`) that `submit` sent for `pipeline` on the
    same `store`, if any: a second one would fail on the cluster, refused by the first's driver.
    Jobs submitted before the store was recorded are not matched."""
    for job in jobs:
        metadata = getattr(job, "metadata", None) or {}
        if str(job.status) not in ("PENDING", "RUNNING"):
            continue
        if metadata.get(PIPELINE_KEY) == pipeline and metadata.get(STORE_KEY) == store:
            return job
    return None
