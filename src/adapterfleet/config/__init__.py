"""The pipeline config: one validated model loaded from YAML, with `key.path=value` overrides.

name: demo                      # names the MLflow experiment, the registry prefix and storage
base_model: minilm-l6           # the packaged MiniLM, a hub id or a local path
max_length: 128
storage: adapterfleet-runs      # run folders, token cache, Ray results (relative to the cwd)
tracking_uri: null              # null: $MLFLOW_TRACKING_URI, else sqlite:///<storage>/mlflow.db
registry_prefix: null           # null: the pipeline name
tasks_file: glue.yaml           # or inline `data_root:` + `tasks:`, or `demo_tasks: true`
adapters: {architecture, reduction_factors, learning_rates, tasks, seeds, training: {...},
           task_training: {rte: {...}}, task_grid: {rte: {reduction_factors, learning_rates}},
           search: grid|optuna, num_samples, scheduler: fifo|asha, asha_grace_period, ...}
fusion: {targets: {rte: all}, preset: dynamic, seeds: [0], training: {...}}
baselines: {systems: [head, full, st-a-houlsby, mt-a, fusion-mt-a], tasks, seeds,
            reduction_factor, training: {...}, system_training: {full: {...}}}
resources: {cpu: 1, gpu: 0}     # per trial; fractional GPUs allowed
budgets: {cpu: {...}, full: {...}}  # named changes to this document, chosen with budget: NAME

The schema (`schema`, `adapter_stage`, `stages`: frozen dataclasses that read and check their own
section), the document (`document`: YAML, budgets, overrides) and the shared field readers
(`fields`). A loaded config has an absolute `storage` and a resolved `tracking_uri`.
"""

from adapterfleet.adapters.config import BaseModelSpec
from adapterfleet.config.adapter_stage import (
    ADAPTER_DEFAULTS,
    ASHA_KEYS,
    OPTUNA_KEYS,
    SCHEDULERS,
    SEARCHES,
    AdapterStage,
    TaskGrid,
)
from adapterfleet.config.document import (
    apply_budget,
    apply_overrides,
    config_file,
    load_config,
    override_keys,
    read_document,
    require_config,
)
from adapterfleet.config.fields import ConfigError, flat_changes, training_with
from adapterfleet.config.schema import (
    DEFAULT_STORAGE,
    TOP_KEYS,
    PipelineConfig,
    absolute_storage,
    parse_config,
    resolve_tracking_uri,
)
from adapterfleet.config.stages import (
    BASELINE_DEFAULTS,
    BASELINE_SYSTEMS,
    FUSION_DEFAULTS,
    BaselineStage,
    FusionStage,
    Resources,
)

__all__ = [
    "ADAPTER_DEFAULTS",
    "ASHA_KEYS",
    "BASELINE_DEFAULTS",
    "BASELINE_SYSTEMS",
    "DEFAULT_STORAGE",
    "FUSION_DEFAULTS",
    "OPTUNA_KEYS",
    "SCHEDULERS",
    "SEARCHES",
    "TOP_KEYS",
    "AdapterStage",
    "BaseModelSpec",
    "BaselineStage",
    "ConfigError",
    "FusionStage",
    "PipelineConfig",
    "Resources",
    "TaskGrid",
    "absolute_storage",
    "apply_budget",
    "apply_overrides",
    "config_file",
    "flat_changes",
    "load_config",
    "override_keys",
    "parse_config",
    "read_document",
    "require_config",
    "resolve_tracking_uri",
    "training_with",
]
