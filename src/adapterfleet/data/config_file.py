"""Reading a tasks file: ``data_root:`` and ``tasks:``, with overrides."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from adapterfleet.data.errors import TaskError
from adapterfleet.data.tasks import TaskSpec
from adapterfleet.errors import allowed_keys, did_you_mean, nul_at, user_path

TOP_KEYS = ("data_root", "tasks")


class _UniqueKeyLoader(yaml.SafeLoader):
    """yaml.safe_load keeps the last of two equal keys; a config file that names a task (or any
    setting) twice is a mistake to report, not to resolve silently. Merge keys (`<<: *base`)
    stay YAML's: the keys written beside one override those it merges. A key YAML reads as a
    boolean or null (an unquoted `no:`, `on:`, `~:`) is refused: it would silently become a task
    named `False`, or a setting no schema knows under a name that is not the one written."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=deep)
            if key is None or isinstance(key, bool):
                written = key_node.value or "(empty)"
                raise yaml.constructor.ConstructorError(
                    None, None, f"key {written} reads as {key!r} in YAML: quote it (\"{written}\")",
                    key_node.start_mark,
                )  # fmt: skip
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r}: give each key once", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def load_yaml(text: str) -> Any:
    """`yaml.safe_load` that refuses duplicate keys (a `ConstructorError` with the line)."""
    return yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass


def load_tasks_config(
    path: str | Path, overrides: Mapping[str, Any] | None = None
) -> dict[str, TaskSpec]:
    """Read a tasks YAML file and validate every task.

    ``data_root`` (default ``.``) is relative to the file's folder, task paths relative to it.
    ``overrides`` is deep-merged into the document first; keys may be dotted, e.g.
    ``{"tasks.rte.max_train_examples": 100}`` or ``{"tasks": {"rte": {"seed": 1}}}``. An
    override may change existing tasks only.
    """
    path = Path(path)
    where = f"tasks config {path}"
    if not path.is_file():
        raise TaskError(None, where, "file not found", "check the path")
    try:
        document = load_yaml(path.read_text(encoding="utf-8-sig"))
    except yaml.YAMLError as exc:
        fix = "indent with spaces, not tabs" if "'\\t'" in str(exc) else ""  # PyYAML's words
        raise TaskError(None, where, f"invalid YAML ({' '.join(str(exc).split())})", fix) from None
    except (UnicodeError, OSError) as exc:
        fix = "save it as UTF-8"
        raise TaskError(None, where, f"cannot read it as UTF-8 text ({exc})", fix) from None
    if not isinstance(document, Mapping):
        raise TaskError(None, where, "expected a mapping with data_root and tasks")
    found = nul_at(document)
    if found is not None:  # as the pipeline document (config/document.py)
        problem = f"{found[1]!r} holds a NUL character (\\0)"
        raise TaskError(None, f"{where}, {found[0] or 'key'}", problem, "remove it")
    return tasks_from_mapping(document, path.parent, overrides, where)


def tasks_from_mapping(
    document: Mapping[str, Any],
    base_dir: str | Path,
    overrides: Mapping[str, Any] | None = None,
    where: str = "tasks config",
) -> dict[str, TaskSpec]:
    """Validate ``{data_root, tasks}``; a relative ``data_root`` is taken from ``base_dir``."""
    for key in document:
        if key not in TOP_KEYS:
            problem = f"unknown key{did_you_mean([key], TOP_KEYS)}"
            raise TaskError(None, f"{where}, {key}", problem, allowed_keys(TOP_KEYS))
    tasks = document.get("tasks")
    if not isinstance(tasks, Mapping) or not tasks:
        raise TaskError(None, f"{where}, tasks", "expected a mapping of task name to task")
    if overrides:
        document = _merge(copy.deepcopy(dict(document)), _expand(overrides), set(tasks))
        tasks = document["tasks"]
    root = document.get("data_root", ".")
    if not isinstance(root, str | Path) or not str(root):
        raise TaskError(None, f"{where}, data_root", f"expected a path, got {root!r}")
    data_root = user_path(Path(base_dir) / Path(root).expanduser(), "data_root")
    return {
        str(name): TaskSpec.from_mapping(str(name), raw, data_root) for name, raw in tasks.items()
    }


def _expand(overrides: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in overrides.items():
        parts = str(key).split(".")
        node = out
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        leaf = parts[-1]
        if isinstance(value, Mapping) and isinstance(node.get(leaf), dict):
            node[leaf].update(_expand(value))
        else:
            node[leaf] = _expand(value) if isinstance(value, Mapping) else value
    return out


def _merge(document: dict[str, Any], overrides: dict[str, Any], known: set) -> dict[str, Any]:
    for name in overrides.get("tasks", {}):
        if name not in known:
            problem = (
                "no such task to change (a config's tasks: and --set beside a tasks file or "
                "demo_tasks change its tasks key by key, and add none)"
            )
            fix = f"known: {sorted(known)}; declare a new task in the tasks file itself"
            raise TaskError(str(name), "overrides", problem, fix)
    return _deep_merge(document, overrides)


def _deep_merge(base: dict[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    for key, value in extra.items():
        if isinstance(value, Mapping) and isinstance(base.get(key), Mapping):
            base[key] = _deep_merge(dict(base[key]), value)
        else:
            base[key] = value
    return base
