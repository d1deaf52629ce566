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
from adapterfleet.registry.tags import BEST_ALIAS, TAG_DATA_SHA256
from adapterfleet.training.metrics import signed
from adapterfleet.tuning.spec import (
    TAG_CONFIG_HASH,
    TAG_METRIC,
    TAG_METRIC_VALUE,
    task_config_hashes,
    task_settings,
)

TAG_SETTINGS = "settings"
MAX_TAG_CHARS = 5000  # a model version tag's column in MLflow's SQL stores
SHOWN = 3  # changes named in the line; the rest are counted


def settings_tag(config: PipelineConfig, task: str) -> str | None:
    """The task's settings as the tag stores them (None: too long for a tag; not recorded)."""
    text = json.dumps(task_settings(config, task), sort_keys=True, default=str)
    return text if len(text) <= MAX_TAG_CHARS else None


def recorded_settings(recorded: str | None) -> dict[str, Any] | None:
    """The settings a `settings` tag's text records (None: no tag, or not a JSON object)."""
    try:
        value = json.loads(recorded) if recorded else None
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def changed_settings(config: PipelineConfig, task: str, recorded: str | None) -> list[str]:
    """`key: old → new` for each setting of `task` that differs from the `recorded` tag, in
    the config's key names (empty: nothing recorded to compare)."""
    before = recorded_settings(recorded)
    if before is None:
        return []
    recorded_task = before.get("task")
    by_path = isinstance(recorded_task, dict) and "name" not in recorded_task  # an earlier form
    now = json.loads(json.dumps(task_settings(config, task, by_path=by_path), default=str))
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


def best_now(uri: str, name: str) -> ModelVersionInfo | None:
    """The `@best` version of model `name` (None: none yet)."""
    from adapterfleet.registry import get_version

    return get_version(uri, name, alias=BEST_ALIAS)


def say_taken(
    say: Say,
    task: str,
    config: PipelineConfig,
    taken: ModelVersionInfo | None,
    info: ModelVersionInfo,
) -> None:
    """What moving `@best` off `taken` (the version it was on) to `info` left behind: the
    warning where another pipeline made `taken` (a shared registry_prefix), or a note where
    `taken`, trained for other settings, scored better on the same dev data."""
    if taken is None or taken.version == info.version:
        return
    other = made_by(taken.tags, config.name)
    if not other:
        _say_left_better(say, task, taken, info)
        return
    if config.registry_prefix == config.name:  # the prefix is this pipeline's: the other's fix
        fix = f"give pipeline '{other}' its own registry_prefix (registry_prefix: {other} in its "
        fix += "config) to keep the two pipelines' models apart"
    else:
        fix = f"give this pipeline its own registry_prefix (e.g. -o registry_prefix={config.name})"
        fix += " to leave the other's models alone"
    maker = made_by(info.tags, config.name)  # moved back to a version the other made too
    now = f"v{info.version}, which it made too" if maker else f"this pipeline's v{info.version}"
    say(
        f"task {task}: warning: @best of {info.name} was v{taken.version}, made by pipeline "
        f"'{other}', and is now {now}: the two share registry_prefix "
        f"'{config.registry_prefix}'; {fix}"
    )


def _say_left_better(say: Say, task: str, taken: ModelVersionInfo, info: ModelVersionInfo) -> None:
    """A re-run with worse settings (a learning rate tried) moved `@best`, which predict, pull
    and the next fusion take, off a better adapter without a word."""
    metric, tags = info.tags.get(TAG_METRIC), taken.tags
    if metric is None or tags.get(TAG_METRIC) != metric:
        return
    if tags.get(TAG_DATA_SHA256) != info.tags.get(TAG_DATA_SHA256):  # other dev rows: not ranked
        return
    try:
        then, now = float(tags[TAG_METRIC_VALUE]), float(info.tags[TAG_METRIC_VALUE])
    except (KeyError, ValueError):
        return
    if signed(metric, then) > signed(metric, now):
        say(
            f"task {task}: note: @best moves here from v{taken.version} (dev {metric} "
            f"{then:.4f}, better than this version's {now:.4f}), which was trained for other "
            f"settings; v{taken.version} stays registered, and a run with its settings puts "
            "@best back on it"
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
