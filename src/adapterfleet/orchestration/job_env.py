"""What a submitted job gets from the submitting shell: MLflow's and Hugging Face's settings,
and never a login inside a URI (`adapterfleet jobs` and the dashboard show the entrypoint)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from adapterfleet.config import ConfigError
from adapterfleet.masking import mask, split_login
from adapterfleet.registry.environment import USER_ENV, run_user

__all__ = ["PASS_ENV", "STOP_WAIT_ENV", "STOP_WAIT_S", "job_env", "login_to_env", "logins_out"]

# What Ray's job supervisor waits, from the SIGTERM of `adapterfleet stop` to its SIGKILL; it
# reads it from the job's env. Ray's own 3 s is little for the driver's cleanup (leave Ray, end
# its open runs KILLED): 1.5-2.4 s on a local store, more on a remote one; cut short, its runs
# stay RUNNING. The driver exits as soon as it is done.
STOP_WAIT_ENV = "RAY_JOB_STOP_WAIT_TIME_S"
STOP_WAIT_S = 30

# Passed from the submitting shell to the job when set there.
PASS_ENV = (
    "MLFLOW_TRACKING_URI",
    "MLFLOW_TRACKING_USERNAME",
    "MLFLOW_TRACKING_PASSWORD",
    "MLFLOW_TRACKING_TOKEN",
    "HF_HUB_OFFLINE",
    "HF_DATASETS_OFFLINE",
    "TRANSFORMERS_OFFLINE",
    STOP_WAIT_ENV,
)


def job_env(extra_env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The env vars a job gets: PASS_ENV from this process (when set) plus `extra_env`; a login
    in MLFLOW_TRACKING_URI goes to MLFLOW_TRACKING_USERNAME / PASSWORD instead. Who submits it
    is its runs' creator (`USER_ENV`), not the cluster's user its processes run as."""
    env = {k: os.environ[k] for k in PASS_ENV if os.environ.get(k)}
    env[USER_ENV] = run_user()
    env.setdefault(STOP_WAIT_ENV, str(STOP_WAIT_S))
    if env.get("MLFLOW_TRACKING_URI"):
        env["MLFLOW_TRACKING_URI"] = login_to_env(env["MLFLOW_TRACKING_URI"], env)
    for key, value in (extra_env or {}).items():
        if key.upper().startswith("RAY_AUTH"):
            raise ValueError(
                f"{key} must not be passed to a job: every node of the cluster has the token"
            )
        env[str(key)] = str(value)
    return env


def login_to_env(uri: str, env: dict[str, str]) -> str:
    """`uri` without its `user:password@`, which goes into `env` as MLflow's login variables:
    a job's entrypoint and its URI are shown by `adapterfleet jobs` and the dashboard."""
    clean, user, password = split_login(uri)
    if user is None:
        return uri
    for name, value in (("MLFLOW_TRACKING_USERNAME", user), ("MLFLOW_TRACKING_PASSWORD", password)):
        if env.get(name) not in (None, "", value):
            raise ConfigError(
                f"tracking URI {mask(uri)} carries a login that {name} contradicts; give it "
                "once, in MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD"
            )
        env[name] = value or ""
    return clean


def logins_out(overrides: Sequence[str], env: dict[str, str]) -> list[str]:
    """The overrides with the login of a `tracking_uri=` moved into `env`."""
    out = []
    for item in overrides:
        key, sep, value = item.partition("=")
        if sep and key.strip() == "tracking_uri":
            item = f"{key}={login_to_env(value, env)}"
        out.append(item)
    return out
