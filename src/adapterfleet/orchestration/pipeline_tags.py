"""The tags a pipeline's `run` sets on its experiment: what `status NAME` and `report NAME`
read of the pipeline when no config is given (its plan, its budget, its `--set` overrides).
`report -c CONFIG` works them out from the config in the same way."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from adapterfleet.config import PipelineConfig
from adapterfleet.masking import masked_settings
from adapterfleet.registry import redact_values
from adapterfleet.registry.descriptions import TAG_NOTE, experiment_note
from adapterfleet.registry.tags import TAG_BUDGET, TAG_BUDGET_TRIMMED, TAG_OVERRIDES
from adapterfleet.results.status_plan import StatusPlan


def pipeline_tags(config: PipelineConfig, overrides: Sequence[str] = ()) -> dict[str, str]:
    """What `status NAME` and `report NAME` read of the pipeline: its plan, the budget chosen
    with what it changed, and the command line's `--set` overrides on top (set on every run,
    so a later run without any does not inherit an earlier run's)."""
    tags = {**StatusPlan.from_config(config).to_tags(), **command_tags(config, overrides)}
    if config.budget is not None:
        tags[TAG_BUDGET_TRIMMED] = _tag_json(redact_values(config.budget_changes))
    stages = (config.adapter_tasks, list(config.fusion.targets), config.baselines.systems)
    tags[TAG_NOTE] = experiment_note(
        config.name, config.base_model, config.registry_prefix, *stages
    )
    return tags


def command_tags(config: PipelineConfig, overrides: Sequence[str]) -> dict[str, str]:
    """The budget and the `--set` overrides of the command, as tags: on the experiment, and on
    a new sweep's runs (what a later command names to continue it)."""
    tags = {} if config.budget is None else {TAG_BUDGET: config.budget}
    kept = [o for o in overrides if not o.startswith("budget=")]
    return {**tags, TAG_OVERRIDES: _tag_json(masked_settings(kept))}


def _tag_json(value: Any) -> str:
    text = json.dumps(value, default=str, separators=(",", ":"))
    return text if len(text) <= 5000 else text[:4990] + "…"
