"""What a run was made with, as tags on every run adapterfleet opens: the versions of
adapterfleet and of the libraries it trains with, and, from a git checkout of adapterfleet, its
commit (MLflow's own `mlflow.source.git.commit`: the UI's "Source" shows `adapterfleet` and it). A
reader of the run installs the same and reruns it; the config's settings are the run's params.
Who made it (`mlflow.user`, the UI's "Created by") is set once, when the run is created; which
driver's job it belongs to (`adapterfleet.driver`) each time a job opens it."""

from __future__ import annotations

import functools
import getpass
import os
import platform
import socket
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import metadata
from pathlib import Path

TAG_VERSIONS = "adapterfleet.versions"
# MLflow's own: the UI's "Source" shows the name, and the commit beside it
TAG_SOURCE_NAME, TAG_SOURCE_TYPE = "mlflow.source.name", "mlflow.source.type"
TAG_GIT_COMMIT = "mlflow.source.git.commit"
TAG_GIT_DIRTY = "adapterfleet.git_dirty"  # "true": the checkout had uncommitted changes
TAG_USER = "mlflow.user"  # MLflow's own: the UI's "Created by", the run's user_id
USER_ENV = "ADAPTERFLEET_USER"  # set by `submit`: who submitted the job the run belongs to
UNKNOWN_USER = "unknown"  # what MLflow records when it knows no user
DRIVER_ENV = "ADAPTERFLEET_DRIVER"  # in a driver's job run as a Ray task: that driver
PACKAGES = ("adapterfleet", "torch", "transformers", "ray", "mlflow", "datasets", "safetensors")


@functools.cache
def environment_tags() -> dict[str, str]:
    """The tags, computed once per process."""
    tags = {
        TAG_VERSIONS: versions_text(),
        TAG_SOURCE_NAME: "adapterfleet",
        TAG_SOURCE_TYPE: "LOCAL",
    }
    commit, dirty = _checkout_commit(Path(__file__).resolve().parents[3])
    if commit:
        tags[TAG_GIT_COMMIT] = commit
        if dirty:
            tags[TAG_GIT_DIRTY] = "true"
    return tags


def run_user() -> str:
    """Who creates a run: in a submitted job, who submitted it (`USER_ENV`: the job's processes
    run as the cluster's user); else as MLflow's fluent `start_run` finds it (its default run
    context): the MLflow login (MLFLOW_TRACKING_USERNAME, else ~/.mlflow/credentials), else the
    OS login name. `MlflowClient.create_run` sets neither: runs it made showed "Created by -"
    and `user_id` 'unknown'."""
    if os.environ.get(USER_ENV, "").strip():
        return os.environ[USER_ENV].strip()
    from mlflow.utils.credentials import read_mlflow_creds

    login = read_mlflow_creds().username
    if login:
        return login
    try:
        return getpass.getuser()
    except (ImportError, KeyError, OSError):  # no login name: a uid with no passwd entry
        return UNKNOWN_USER


def run_driver() -> str:
    """The driver a run belongs to, `<host> <pid>`: in a job that a driver runs as a Ray task (a
    fusion, a baseline), that driver (`DRIVER_ENV`, which `driven_by` sets); else this process.
    On Ctrl-C or SIGTERM a driver ends the runs tagged with it that are still open."""
    given = os.environ.get(DRIVER_ENV, "").strip()
    return given or f"{socket.gethostname()} {os.getpid()}"


@contextmanager
def driven_by(driver: str) -> Iterator[None]:
    """The runs opened in the block belong to `driver` (`run_driver`), as the job of it that
    runs in this process (a Ray worker)."""
    before = os.environ.get(DRIVER_ENV)
    os.environ[DRIVER_ENV] = driver
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(DRIVER_ENV, None)
        else:
            os.environ[DRIVER_ENV] = before


def versions_text() -> str:
    """`adapterfleet 0.1.0, torch 2.13.0, ..., python 3.11.9` (one not installed: left out)."""
    found = []
    for name in PACKAGES:
        try:
            found.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            continue
    return ", ".join([*found, f"python {platform.python_version()}"])


def _checkout_commit(root: Path) -> tuple[str | None, bool]:
    """HEAD of the git checkout adapterfleet is imported from, and whether it has uncommitted
    changes; (None, False) for an installed wheel or without git."""
    if not (root / ".git").exists() or not (root / "src" / "adapterfleet").is_dir():
        return None, False
    try:
        head = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"],
            capture_output=True, text=True, timeout=10, check=True,
        ).stdout.strip()  # fmt: skip
        status = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True, text=True, timeout=10, check=True,
        ).stdout  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None, False
    return (head or None), bool(status.strip())
