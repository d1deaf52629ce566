"""MLflow tracking and model registry for adapterfleet: the only package that imports mlflow.

mlflow is imported lazily inside functions; importing this package does no work.
"""

from adapterfleet.registry.errors import RegistryError, RegistryTimeout, safe_uri
from adapterfleet.registry.experiments import ensure_experiment, experiment_tags
from adapterfleet.registry.info import (
    ModelVersionInfo,
    adapter_model_name,
    fusion_model_name,
    parse_model_name,
    sha256_file,
)
from adapterfleet.registry.listing import list_models
from adapterfleet.registry.models import (
    find_version_by_tag,
    get_version,
    register_version,
    set_alias,
)
from adapterfleet.registry.pulled import PULLED_FILE, PulledFolder, pull_folder, read_pulled
from adapterfleet.registry.pulling import pull, pull_companion
from adapterfleet.registry.redact import REDACTED, redact, redact_values
from adapterfleet.registry.results import (
    ExperimentData,
    RunData,
    active_runs,
    download_run_file,
    find_experiment,
    finished_runs,
)
from adapterfleet.registry.runs import (
    MlflowRunLogger,
    finished_run_metrics,
    open_baseline_run,
    open_fusion_run,
    open_prune_run,
    open_report_run,
    open_sweep_run,
    open_trial_run,
)
from adapterfleet.registry.status import RunRecord, experiment_runs
from adapterfleet.registry.store import (
    check_tracking_uri,
    default_artifact_location,
    default_tracking_uri,
)
from adapterfleet.registry.tags import (
    TAG_KIND,
    TAG_PARENT_RUN,
    TAG_SEED,
    TAG_SHA256,
    TAG_SWEEP,
    TAG_SYSTEM,
    TAG_TASK,
    TAG_TRIAL_ID,
)
from adapterfleet.registry.wait import wait_for_models

__all__ = [
    "PULLED_FILE",
    "REDACTED",
    "TAG_KIND",
    "TAG_PARENT_RUN",
    "TAG_SEED",
    "TAG_SHA256",
    "TAG_SWEEP",
    "TAG_SYSTEM",
    "TAG_TASK",
    "TAG_TRIAL_ID",
    "MlflowRunLogger",
    "ModelVersionInfo",
    "PulledFolder",
    "RegistryError",
    "RegistryTimeout",
    "ExperimentData",
    "RunData",
    "active_runs",
    "download_run_file",
    "find_experiment",
    "finished_runs",
    "RunRecord",
    "adapter_model_name",
    "check_tracking_uri",
    "default_artifact_location",
    "default_tracking_uri",
    "ensure_experiment",
    "experiment_runs",
    "experiment_tags",
    "find_version_by_tag",
    "finished_run_metrics",
    "fusion_model_name",
    "get_version",
    "list_models",
    "open_baseline_run",
    "open_fusion_run",
    "open_prune_run",
    "open_report_run",
    "open_sweep_run",
    "open_trial_run",
    "parse_model_name",
    "pull",
    "pull_companion",
    "pull_folder",
    "read_pulled",
    "redact",
    "redact_values",
    "register_version",
    "safe_uri",
    "set_alias",
    "sha256_file",
    "wait_for_models",
]
