"""Tag keys written by adapterfleet on MLflow runs and model versions."""

BEST_ALIAS = "best"  # the registry alias of the version a task or fusion target uses
TAG_KIND = "adapterfleet.kind"  # "sweep" | "trial" | "fusion" | "baseline" | "mt-a" | "prune" |
# "report" on runs
TAG_SWEEP = "adapterfleet.sweep"
# On a report run: "all" (`report NAME`: every run of the experiment), else the budget and
# `--set` of the config's settings it counted (`report -c`, a pipeline's own report)
TAG_REPORT_SCOPE = "adapterfleet.report_scope"
# On a sweep run and a registered adapter version: sha256 of the task's settings
# (`tuning.spec.task_config_hash`); a trial was made with its parent sweep run's.
TAG_CONFIG_HASH = "config_hash"
TAG_TASK = "adapterfleet.task"
TAG_TRIAL_ID = "adapterfleet.trial_id"
TAG_SYSTEM = "adapterfleet.system"  # a column of the paper's Table 1: "fusion-st-a", "head", ...
# On a trial the scheduler (ASHA) stopped: the epoch it stopped after. Its run ends FINISHED
# (stopping is not a failure) but it saved no adapter, so it is neither a candidate nor a result.
TAG_STOPPED_EARLY = "adapterfleet.stopped_early"
TAG_SEED = "seed"
TAG_PARENT_RUN = "mlflow.parentRunId"
TAG_SHA256 = "sha256"
TAG_DATA_SHA256 = "data_sha256"  # the task's local files as the adapter trained on them
TAG_BASE_MODEL = "base_model"  # on a registered version: the base it was trained on
# on a registered version: the dtype that base was loaded in (`base_model_dtype`, `auto` too)
TAG_BASE_MODEL_DTYPE = "base_model_dtype"
TAG_BASE_MODEL_LAYOUT = "base_model_layout"  # its JSON, or "built-in"
TAG_WEIGHTS_FILE = "adapterfleet.weights_file"
TAG_ARTIFACT_PATH = "adapterfleet.artifact_path"
TAG_PRUNED_FROM = "adapterfleet.pruned_from"  # "vN": the fusion version a pruned one came from
TAG_LINEAGE = "adapterfleet.lineage"  # a fusion's adapters: "task:vN,task:vN"
TAG_LINEAGE_KEY = "adapterfleet.lineage_key"  # sha256 of what a fusion was trained from
TAG_TORCH_THREADS = "adapterfleet.torch_threads"  # what a run trained with: its last digits
TAG_MAX_LENGTH = "adapterfleet.max_length"  # a fusion's rows were cut at (its adapters')
# experiment tag: the budget that ran, e.g. "cpu"; on a sweep run: the one it was started with
TAG_BUDGET = "adapterfleet.budget"
TAG_BUDGET_TRIMMED = "adapterfleet.budget_trimmed"  # experiment tag: JSON of what it changed
# experiment tag: JSON list of the --set overrides; on a sweep run: those it was started with
TAG_OVERRIDES = "adapterfleet.overrides"
TAG_INTERRUPTED = "adapterfleet.interrupted"  # experiment tag: ms since 1970, Ctrl-C/SIGTERM
# On every run: "<host> <pid>" of the driver whose job opened it (`environment.run_driver`); on
# Ctrl-C or SIGTERM that driver ends its runs still open KILLED (`interrupted.end_open_runs`)
TAG_DRIVER = "adapterfleet.driver"
# experiment tag: "<ms since 1970> <interval s> <host> <pid>", then " ended" on the last stamp
TAG_HEARTBEAT = "adapterfleet.heartbeat"
# experiment tag: the same stamp, from the driver that runs the sweep (`run`, `sweep`) only
TAG_SWEEP_DRIVER = "adapterfleet.sweep_driver"
TAG_COMPANION = "adapterfleet.companion."  # + folder: "<file>:<sha256>" of a folder beside it


def quote(value: str) -> str:
    """`value` as a quoted literal for an MLflow search filter."""
    if "'" in value or "\\" in value:
        raise ValueError(f"value {value!r} contains a quote or backslash; not usable in a filter")
    return f"'{value}'"
