"""`ConfigError` and the small readers every part of the config shares.

Each reader takes the raw YAML value and `where` (the key path it came from, for the message)
and returns the typed value or raises a one-line `ConfigError` that names the field and the fix.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from adapterfleet.training.config import TrainConfig

# TrainConfig fields that YAML may hand over as text ("1e-4" is a string to PyYAML).
_FLOAT_TRAINING_KEYS = ("learning_rate", "weight_decay", "warmup_ratio", "max_grad_norm")


class ConfigError(ValueError):
    """A config value is wrong; the message names the field and the fix."""


def as_int(value: Any, where: str, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(f"{where}: expected an integer >= {minimum}, got {value!r}")
    return value


def as_float(value: Any, where: str) -> float:
    try:
        if isinstance(value, bool):
            raise ValueError
        return float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{where}: expected a number, got {value!r}") from None


def as_mapping(raw: Any, where: str) -> dict[str, Any]:
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where}: expected a mapping, got {type(raw).__name__} {raw!r}")
    return dict(raw)


def list_at(raw: Mapping[str, Any], key: str, default: list[Any], where: str = "") -> list[Any]:
    """`raw[key]` as a non-empty list (a single value becomes a list of one)."""
    value = raw.get(key, default)
    value = [value] if not isinstance(value, list) else value
    if not value:
        raise ConfigError(f"{where + '.' if where else ''}{key}: needs at least one value")
    return value


def string_at(document: Mapping[str, Any], key: str, default: str) -> str:
    value = document.get(key) or default
    if not isinstance(value, str):
        raise ConfigError(f"{key}: expected a string, got {value!r}")
    return value


def choice(value: Any, allowed: Sequence[str], where: str) -> str:
    if value not in allowed:
        raise ConfigError(f"{where}: {value!r} is unknown; use {' or '.join(allowed)}")
    return str(value)


def refuse_unknown(raw: Mapping[str, Any], allowed: Sequence[str], where: str) -> None:
    unknown = sorted(set(raw) - set(allowed))
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {unknown}; allowed: {', '.join(allowed)}")


def seeds_at(raw: Mapping[str, Any], where: str) -> tuple[int, ...]:
    """`raw["seeds"]` (default `[0]`): one or more distinct integers >= 0."""
    value = raw.get("seeds", [0])
    if value == []:
        raise ConfigError(f"{where}: needs at least one seed")
    seeds = tuple(as_int(v, where, 0) for v in (value if isinstance(value, list) else [value]))
    if len(set(seeds)) != len(seeds):
        raise ConfigError(f"{where}: a seed is listed twice in {list(seeds)}")
    return seeds


def check_tasks(names: Sequence[str], tasks: Mapping[str, Any], where: str) -> None:
    """Every name is one of `tasks`, and none is listed twice."""
    unknown = [n for n in names if n not in tasks]
    if unknown:
        raise ConfigError(f"{where}: unknown task(s) {unknown}; known: {sorted(tasks)}")
    if len(set(names)) != len(names):
        raise ConfigError(f"{where}: a task is listed twice in {list(names)}")


def training_at(raw: Any, defaults: Mapping[str, Any], where: str) -> TrainConfig:
    """A `training:` mapping over `defaults`, as a `TrainConfig`; its errors say `where`."""
    values = {**defaults, **as_mapping(raw or {}, where)}
    for key in _FLOAT_TRAINING_KEYS:
        if isinstance(values.get(key), str):
            values[key] = as_float(values[key], f"{where}.{key}")
    try:
        return TrainConfig.from_dict(values)
    except (TypeError, ValueError) as error:
        text = str(error)  # "TrainConfig.patience must be ..." or "TrainConfig: unknown ..."
        if text.startswith("TrainConfig."):
            raise ConfigError(f"{where}.{text.removeprefix('TrainConfig.')}") from None
        raise ConfigError(f"{where}: {text.removeprefix('TrainConfig: ')}") from None


def trainings_at(
    per_key: Mapping[str, Any], base: Mapping[str, Any], where: str
) -> dict[str, TrainConfig]:
    """`task_training:` / `system_training:`: per key, that key's changes over `base`."""
    return {
        str(key): training_at(
            {**base, **as_mapping(changes, f"{where}.{key}")}, {}, f"{where}.{key}"
        )
        for key, changes in per_key.items()
    }


def flat_changes(changes: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """`{"a": {"b": 1}}` -> `{"a.b": 1}`: what a budget changes, one key path per value."""
    out: dict[str, Any] = {}
    for key, value in changes.items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            out.update(flat_changes(value, path + "."))
        else:
            out[path] = value
    return out
