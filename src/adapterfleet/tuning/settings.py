"""What changed since a task's adapter was registered, in the config's own key names.

A registered adapter version carries its config hash (`spec.task_config_hash`), which says
whether the settings changed, not which. It also carries the settings themselves as JSON (tag
`settings`), so the next run can say why it trains the task again:
`task banana: its settings changed since toy.adapter.banana v1 (tasks.banana.max_train_examples:
none → 200); training it again`. Versions from before the tag get the reason without the keys.
"""

from __future__ import annotations

import json
from typing import Any

from adapterfleet.config import PipelineConfig
from adapterfleet.console import Say
from adapterfleet.registry import ModelVersionInfo
from adapterfleet.registry.info import made_by
from adapterfleet.registry.tags import BEST_ALIAS
from adapterfleet.tuning.spec import TAG_CONFIG_HASH, task_config_hashes, task_settings

TAG_SETTINGS = "settings"
MAX_TAG_CHARS = 5000  # a model version tag's column in MLflow's SQL stores
SHOWN = 3  # changes named in the line; the rest are counted


def settings_tag(config: PipelineConfig, task: str) -> str | None:
    """The task's settings as the tag stores them (None: too long for a tag; not recorded)."""
    text = json.dumps(task_settings(config, task), sort_keys=True, default=str)
    return text if len(text) <= MAX_TAG_CHARS else None


def changed_settings(config: PipelineConfig, task: str, recorded: str | None) -> list[str]:
    """`key: old → new` for each setting of `task` that differs from the `recorded` tag, in
    the config's key names (empty: nothing recorded to compare)."""
    try:
        before = json.loads(recorded) if recorded else None
    except ValueError:
        before = None
    if not isinstance(before, dict):
        return []
    now = json.loads(json.dumps(task_settings(config, task), default=str))
    old, new = _flat(before, ""), _flat(now, "")
    keys = sorted(set(old) | set(new), key=lambda k: (k.split(".")[0] != "task", k))
    return [
        f"{_config_key(config, task, key)}: {_shown(old.get(key))} → {_shown(new.get(key))}"
        for key in keys
        if old.get(key) != new.get(key)
    ]


def changed_text(changes: list[str]) -> str:
    """` (a: 1 → 2, b: x → y and 3 more)`, or nothing when no change is known."""
    if not changes:
        return ""
    more = len(changes) - SHOWN
    shown = ", ".join(changes[:SHOWN]) + (f" and {more} more" if more > 0 else "")
    return f" ({shown})"


def other_settings(config: PipelineConfig, task: str, info: ModelVersionInfo) -> str | None:
    """How the registered adapter `info` of `task` was trained otherwise than `config` says,
    as `changed_text` writes it ("" when the version records no settings to compare); None
    when it was trained for these settings, or records no config hash (an import)."""
    recorded = info.tags.get(TAG_CONFIG_HASH)
    if recorded is None or task not in config.adapter_tasks:
        return None
    if recorded in task_config_hashes(config, task):
        return None
    return changed_text(changed_settings(config, task, info.tags.get(TAG_SETTINGS)))


def best_of_another(uri: str, name: str, pipeline: str) -> ModelVersionInfo | None:
    """The `@best` version of model `name`, when another pipeline than `pipeline` made it (a
    registry_prefix shared by two pipelines); else None."""
    from adapterfleet.registry import get_version

    best = get_version(uri, name, alias=BEST_ALIAS)
    return best if best is not None and made_by(best.tags, pipeline) else None


def say_taken(
    say: Say,
    task: str,
    config: PipelineConfig,
    taken: ModelVersionInfo | None,
    info: ModelVersionInfo,
) -> None:
    """The warning that this pipeline moved `@best` off `taken`, another pipeline's version."""
    if taken is None or taken.version == info.version:
        return
    other = made_by(taken.tags, config.name)
    say(
        f"task {task}: warning: @best of {info.name} was v{taken.version}, made by pipeline "
        f"'{other}', and is now this pipeline's v{info.version}: the two share registry_prefix "
        f"'{config.registry_prefix}'; give this pipeline its own registry_prefix (e.g. "
        f"-o registry_prefix={config.name}) to leave the other's models alone"
    )


def _flat(value: Any, prefix: str) -> dict[str, Any]:
    if isinstance(value, dict):
        flat: dict[str, Any] = {}
        for key, inner in value.items():
            flat.update(_flat(inner, f"{prefix}.{key}" if prefix else str(key)))
        return flat
    return {prefix: value}


def _config_key(config: PipelineConfig, task: str, key: str) -> str:
    """The payload's key as the config spells it."""
    head, _, rest = key.partition(".")
    if head == "task":
        return f"tasks.{task}.{rest}"
    if head == "training":
        own = task in config.adapters.task_training
        return f"adapters.{f'task_training.{task}' if own else 'training'}.{rest}"
    return key if head in ("base_model", "base_model_layout", "max_length") else f"adapters.{key}"


def _shown(value: Any) -> str:
    if value is None:
        return "none"
    return json.dumps(value) if isinstance(value, list | str) else str(value)
