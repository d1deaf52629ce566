"""`ConfigError` and the small readers every part of the config shares.

Each reader takes the raw YAML value and `where` (the key path it came from, for the message)
and returns the typed value or raises a one-line `ConfigError` that names the field and the fix.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from adapterfleet.errors import UserError, unknown_keys
from adapterfleet.training.config import MAX_SEED, TrainConfig

# TrainConfig fields that YAML may hand over as text ("1e-4" is a string to PyYAML).
_FLOAT_TRAINING_KEYS = ("learning_rate", "weight_decay", "warmup_ratio", "max_grad_norm")
# The keys a `training:` mapping takes: every TrainConfig field but `progress`, which is not a
# setting of the run but whether the fit loop draws a progress bar, and which the commands set
# themselves (on when stderr is a terminal).
TRAINING_KEYS = tuple(f.name for f in dataclasses.fields(TrainConfig) if f.name != "progress")
# Names that become parts of folder, file, experiment and model names (a file name has at most
# 255 bytes, and a trial's folder joins the pipeline name, a task name and its settings).
NAME_MAX = 64
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*$")
_DOTTED_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
# How the command line spells the training settings it may change (train, fuse).
TRAINING_OPTIONS = {
    "learning_rate": "--lr",
    "max_epochs": "--epochs",
    "batch_size": "--batch-size",
    "seed": "--seed",
}


class ConfigError(UserError, ValueError):
    """A config value is wrong; the message names the field and the fix."""


def as_int(value: Any, where: str, minimum: int, maximum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(f"{where}: expected an integer >= {minimum}, got {value!r}")
    if maximum is not None and value > maximum:
        raise ConfigError(f"{where}: expected an integer <= {maximum}, got {value!r}")
    return value


def as_float(value: Any, where: str) -> float:
    """A finite number (YAML may give it as text: `1e-4`); nan and inf are refused."""
    try:
        if isinstance(value, bool):
            raise ValueError
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        raise ConfigError(f"{where}: expected a number, got {value!r}") from None
    if not math.isfinite(number):
        raise ConfigError(f"{where}: expected a finite number, got {value!r}")
    return number


def as_positive(value: Any, where: str) -> float:
    """A finite number > 0 (a learning rate, a CPU count)."""
    number = as_float(value, where)
    if number <= 0:
        raise ConfigError(f"{where}: expected a number > 0, got {value!r}")
    return number


def name_at(document: Mapping[str, Any], key: str, default: str, dots: bool = False) -> str:
    """A name that becomes part of folder, experiment and model names: letters, digits, `_`,
    `-` (and `.` where `dots`), at most `NAME_MAX` characters."""
    value = document.get(key) or default
    pattern = _DOTTED_NAME if dots else _NAME
    allowed = "letters, digits, '_', '.' or '-'" if dots else "letters, digits, '_' or '-'"
    if not isinstance(value, str) or not pattern.match(value):
        raise ConfigError(f"{key}: {value!r} must be {allowed} (e.g. {key}: glue)")
    if len(value) > NAME_MAX:
        raise ConfigError(
            f"{key}: {len(value)} characters is too long for the folder and model names made "
            f"from it; use at most {NAME_MAX}"
        )
    return value


def distinct(values: Sequence[Any], where: str) -> tuple[Any, ...]:
    """`values` as a tuple; a value given twice would train the same trial twice."""
    seen = [v for i, v in enumerate(values) if v in values[:i]]
    if seen:
        raise ConfigError(f"{where}: {seen[0]!r} is listed twice in {list(values)}; list it once")
    return tuple(values)


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
    """`document[key]`, `default` when absent or null; an empty string is refused (it would
    silently mean the default)."""
    value = document.get(key)
    value = default if value is None else value
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{key}: expected a non-empty string, got {value!r}")
    return value


def choice(value: Any, allowed: Sequence[str], where: str) -> str:
    if value not in allowed:
        raise ConfigError(f"{where}: {value!r} is unknown; use {' or '.join(allowed)}")
    return str(value)


def refuse_unknown(raw: Mapping[str, Any], allowed: Sequence[str], where: str) -> None:
    unknown = sorted(set(raw) - set(allowed), key=str)  # a number key sorts among names
    if unknown:
        raise ConfigError(f"{where}: {unknown_keys(unknown, allowed)}")


def seeds_at(raw: Mapping[str, Any], where: str) -> tuple[int, ...]:
    """`raw["seeds"]` (default `[0]`): one or more distinct integers >= 0."""
    value = raw.get("seeds", [0])
    if value == []:
        raise ConfigError(f"{where}: needs at least one seed")
    values = value if isinstance(value, list) else [value]
    seeds = tuple(as_int(v, where, 0, MAX_SEED) for v in values)
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
    refuse_unknown(values, TRAINING_KEYS, where)
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


def training_with(training: TrainConfig, **changes: Any) -> TrainConfig:
    """`training` with the command line's `changes` (None: the option was left out); a value
    out of range is a `ConfigError` naming the option (`--lr: must be a number > 0, ...`)."""
    kept = {key: value for key, value in changes.items() if value is not None}
    try:
        return replace(training, **kept)
    except (TypeError, ValueError) as error:
        text = str(error).removeprefix("TrainConfig.")
        field, _, rest = text.partition(" ")
        option = TRAINING_OPTIONS.get(field, field)
        raise ConfigError(f"{option}: {rest}" if rest else text) from None


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


def check_path_length(path: Any, where: str) -> None:
    """Refuse a path no file system takes: a name over 255 bytes or the whole over 4096."""
    text = str(path)
    longest = max((len(part.encode()) for part in text.split("/")), default=0)
    if longest > 255 or len(text.encode()) > 4096:
        raise ConfigError(
            f"{where}: a path with a name of {longest} bytes ({len(text.encode())} in all) is "
            "longer than file systems allow (255 a name, 4096 in all); use a shorter path"
        )
