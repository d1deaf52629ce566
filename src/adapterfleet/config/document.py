"""The pipeline document: the YAML file, its named budgets and `--set key.path=value` overrides.

`load_config` reads the file, applies the overrides, merges the chosen budget (the overrides are
applied again after it, so the command line wins) and hands the document to `parse_config`.
"""

from __future__ import annotations

import copy
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml

from adapterfleet.config.fields import ConfigError, as_mapping
from adapterfleet.config.keys import BUDGET_KEYS, refuse_unknown_keys
from adapterfleet.config.schema import PipelineConfig, parse_config
from adapterfleet.data import load_yaml
from adapterfleet.errors import nul_at

TAB = "'\\t'"  # how PyYAML names a tab it cannot read: found character '\t' that cannot ...
PACKAGED = ("demo",)  # configs that ship with adapterfleet: `-c demo` from any folder


def config_file(path: str | Path) -> Path:
    """`path`, or the config shipped with adapterfleet when `path` is one of their names
    (`demo`) and no such file is here: a file of that name in the working folder wins."""
    path = Path(path)
    if str(path) in PACKAGED and not path.is_file():
        return Path(__file__).resolve().parents[1] / "configs" / f"{path}.yaml"
    return path


def require_config(value: object) -> PipelineConfig:
    """`value`, a `PipelineConfig`, or a one-line refusal naming `load_config` (a path given
    to `run_pipeline` was an AttributeError of `'str' object has no attribute 'storage'`)."""
    if not isinstance(value, PipelineConfig):
        raise ConfigError(
            f"config: expected a PipelineConfig, got the {type(value).__name__} {value!r:.80}; "
            "read a file with load_config(path)"
        )
    return value


def load_config(path: str | Path, overrides: Sequence[str] | None = ()) -> PipelineConfig:
    """Read, override and validate a pipeline YAML file (or a packaged config's name, see
    `config_file`); every error is one line."""
    if not isinstance(path, str | os.PathLike):  # a dict: a TypeError of pathlib's
        got = type(path).__name__
        raise ConfigError(
            f"config: expected the path of a YAML file (str or Path), got a {got}; a document "
            "already read is parse_config(document, folder)"
        )
    overrides = () if overrides is None else overrides  # as left out
    if isinstance(overrides, str):  # read one character at a time: "override 'a' must ..."
        raise ConfigError(
            f"overrides: expected a list of key.path=value strings, got the str {overrides!r}; "
            f"give [{overrides!r}]"
        )
    path = config_file(path)
    document = apply_overrides(read_document(path), overrides)
    document = apply_budget(document, overrides)
    document.setdefault("name", re.sub(r"[^A-Za-z0-9_-]", "-", path.stem))
    refuse_nul(document)
    try:
        return replace(parse_config(document, path.parent), overrides=tuple(overrides))
    except ConfigError as error:
        raise ConfigError(str(error) + _budget_note(str(error), document, overrides)) from None


def _budget_note(message: str, document: Mapping[str, Any], overrides: Sequence[str]) -> str:
    """` (from budgets.<name>, the budget in use)` where the key a message starts with holds a
    value the budget in use set and no override replaced; else nothing. Without it a wrong
    value in a budget is named where the file does not have it."""
    name = document.get("budget")
    changes = (document.get("budgets") or {}).get(name) if name is not None else None
    task = re.match(r"task '([^']+)', ([\w.]+)", message)  # a task's field, as tasks say it
    found = re.match(r"[A-Za-z_][\w.-]*", message)
    if not isinstance(changes, Mapping) or not (task or found):
        return ""
    key = f"tasks.{task[1]}.{task[2]}" if task else found.group()
    key = key.rstrip(".")
    if unknown := re.match(r"[\w.]+: unknown key\(s\) \['([^']+)'", message):
        key = f"{key}.{unknown[1]}"  # the key itself: `-o adapters.bogus=1` was the budget's
    if any(key == o or key.startswith(o + ".") for o in override_keys(overrides)):
        return ""  # the command line set it last
    node: Any = changes
    parts = key.split(".")
    while parts and isinstance(node, Mapping):
        part, parts = _next_key(node, parts) if len(parts) > 1 else (parts[0], [])
        if part not in node:
            return ""
        node = node[part]
    return f" (from budgets.{name}, the budget in use)"


def override_keys(overrides: Sequence[str]) -> list[str]:
    """The keys `key.path=value` overrides set, as written."""
    return [item.partition("=")[0].strip() for item in overrides]


def refuse_nul(document: Any) -> None:
    """No key or text of the document holds a NUL character: no file system, URI or shell
    takes one, and Python's path functions raise on it. (A `tasks_file`: `load_tasks_config`.)"""
    found = nul_at(document)
    if found is not None:
        where, text = found
        raise ConfigError(f"{where or 'config'}: {text!r} holds a NUL character (\\0); remove it")


def read_document(path: Path) -> dict[str, Any]:
    """The settings mapping of a pipeline YAML file; a syntax error names its line."""
    if path.is_dir():
        found = _yaml_files(path)
        there = f", e.g. one there: {', '.join(found)}" if found else ""
        raise ConfigError(
            f"config file {path} is a folder; pass the path of a pipeline YAML file{there}"
        )
    if not path.is_file():
        named = f" (or the name of one that ships with adapterfleet: {', '.join(PACKAGED)})"
        raise ConfigError(
            f"config file {path} not found; pass the path of a pipeline YAML file"
            + ("" if path.suffix else named)  # a bare word may have meant one of those
        )
    try:
        document = load_yaml(path.read_text(encoding="utf-8-sig"))  # a byte-order mark is skipped
    except UnicodeDecodeError as error:
        raise ConfigError(
            f"{path}: not UTF-8 text (byte {error.object[error.start]:#04x} at offset "
            f"{error.start}); save the config as UTF-8"
        ) from None
    except OSError as error:
        raise ConfigError(f"{path}: cannot read the config ({error.strerror or error})") from None
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(error, "problem", None) or str(error).splitlines()[0]
        if TAB in problem:  # YAML takes no tab where it reads indentation
            problem += "; indent with spaces, not tabs"
        if isinstance(error, yaml.constructor.ConstructorError):  # a duplicate or boolean key
            raise ConfigError(f"{path}{where.replace(' at', ',')}: {problem}") from None
        raise ConfigError(f"{path}: YAML syntax error{where}: {problem}") from None
    if document is None:  # no bytes, or only blank lines and comments
        raise ConfigError(
            f"{path} is empty: it holds no settings; write the pipeline's (name, base_model, "
            "tasks, ...; see the README's Config section), or pass -c demo for the packaged one"
        )
    if not isinstance(document, Mapping):
        found = type(document).__name__
        raise ConfigError(
            f"{path}: expected a mapping of settings at the top level (key: value lines), got a "
            f"{found}"
        )
    return dict(document)


def _yaml_files(folder: Path, most: int = 5) -> list[str]:
    """The names of the first `most` YAML files in `folder` (none where it cannot be read)."""
    try:
        names = sorted(p.name for p in folder.iterdir() if p.suffix in (".yaml", ".yml"))
    except OSError:
        return []
    return names[:most]


def apply_budget(document: dict[str, Any], overrides: Sequence[str] = ()) -> dict[str, Any]:
    """Merge the changes of the budget named by `budget` (from `budgets`) into the document;
    the command line's overrides are applied again after it, so they win."""
    budgets = check_budgets(document)
    name = document.get("budget")
    if name is None:
        return document
    if not isinstance(name, str | int) or isinstance(name, bool):
        raise ConfigError(f"budget: {name!r} must be the name of a budget (e.g. budget: cpu)")
    if name not in budgets:
        known = ", ".join(map(str, budgets)) or "none (add a budgets: section)"
        raise ConfigError(f"budget: {name!r} is not declared in budgets; declared: {known}")
    return apply_overrides(_merged(document, budgets[name]), overrides)


def check_budgets(document: Mapping[str, Any]) -> dict[Any, dict[str, Any]]:
    """Every declared budget, used or not, by name: a mapping of changes that sets neither
    budget nor budgets and whose keys the schema knows (names only, `config/keys.py`), so a
    typo in a budget is refused when the config loads, naming where it was written."""
    budgets = as_mapping(document.get("budgets") or {}, "budgets")
    checked = {}
    for name, changes in budgets.items():
        where = f"budgets.{name}"
        checked[name] = as_mapping(changes or {}, where)
        if "budget" in checked[name] or "budgets" in checked[name]:
            raise ConfigError(f"{where}: a budget cannot set budget or budgets")
        refuse_unknown_keys(checked[name], BUDGET_KEYS, where)
    return checked


def _merged(document: Mapping[str, Any], changes: Mapping[str, Any]) -> dict[str, Any]:
    """`document` with `changes` merged in: mappings key by key, anything else replaced."""
    out = copy.deepcopy(dict(document))
    for key, value in changes.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = _merged(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def apply_overrides(document: dict[str, Any], overrides: Sequence[str]) -> dict[str, Any]:
    """`adapters.training.max_epochs=3` style overrides; values are read as YAML. A key that
    holds dots itself (a task named `glue.rte`) is matched whole where the document has it:
    `tasks.glue.rte.max_train_examples=32` sets that task's field."""
    document = copy.deepcopy(document)
    for item in overrides:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip() or any(not p for p in key.strip().split(".")):
            raise ConfigError(f"override {item!r} must look like key.path=value")
        node, parts, path = document, key.strip().split("."), []
        while len(parts) > 1:
            part, parts = _next_key(node, parts)
            if not parts:
                break
            path.append(part)
            if path == ["tasks", part] and _declares_tasks(document) and part not in node:
                known = ", ".join(map(str, node))
                raise ConfigError(
                    f"override {item!r}: no task {part!r} in tasks (tasks: {known}); check the name"
                )
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                where = ".".join(path)
                raise ConfigError(
                    f"override {item!r}: {where} is {child!r}, not a mapping; set {where} "
                    "itself, or make it a mapping first"
                )
            node = child
        else:
            part = parts[0]
        node[part] = _scalar(item, raw)
    return document


def _declares_tasks(document: Mapping[str, Any]) -> bool:
    """Whether the document's `tasks` is the whole list of tasks (inline, with `data_root`);
    beside `tasks_file` or `demo_tasks` it holds changes to some of their tasks only, which
    `read_tasks` checks against the tasks the file or the demo declares."""
    tasks = document.get("tasks")
    inline = not (document.get("tasks_file") or document.get("demo_tasks"))
    return inline and isinstance(tasks, dict) and bool(tasks)


def _next_key(node: Mapping[str, Any], parts: list[str]) -> tuple[str, list[str]]:
    """The longest run of `parts` joined by dots that is a key of `node` (else the first part),
    and the parts after it."""
    for end in range(len(parts), 1, -1):
        if ".".join(parts[:end]) in node:
            return ".".join(parts[:end]), parts[end:]
    return parts[0], parts[1:]


def _scalar(item: str, raw: str) -> Any:
    """An override value read as YAML (numbers, lists, mappings, text). An empty one is refused:
    it read as null, which a field then called `got None`, or silently took as its default."""
    if not raw.strip():
        raise ConfigError(
            f"override {item!r}: the value after '=' is empty; give the value (null for none, "
            "'\"\"' for empty text)"
        )
    try:
        return load_yaml(raw)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at column {mark.column + 1}" if mark else ""
        problem = getattr(error, "problem", None) or str(error).splitlines()[0]
        raise ConfigError(
            f"override {item!r}: the value is not valid YAML{where} ({problem}); to give it "
            f"as text, quote it: {item.partition('=')[0]}='\"...\"'"
        ) from None
