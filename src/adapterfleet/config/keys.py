"""The keys each mapping of a pipeline document takes, as one tree made of the lists the schema
itself checks against (`TOP_KEYS`, `ADAPTER_KEYS`, `TASK_KEYS`, ...), so the two cannot differ.

`refuse_unknown_keys` walks a part of a document with it, key names only: no value is read and
no task file opened. `load_config` checks every declared budget's changes this way, used or not
(`document.check_budgets`); the schema checks the rest, values too, when it parses.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from adapterfleet.config.adapter_stage import ADAPTER_KEYS, TaskGrid
from adapterfleet.config.base_model import LAYOUT_KEYS
from adapterfleet.config.fields import TRAINING_KEYS, refuse_unknown
from adapterfleet.config.schema import TOP_KEYS
from adapterfleet.config.stages import BASELINE_KEYS, FUSION_KEYS, RESOURCE_KEYS
from adapterfleet.data.choices import LAYOUT_KEYS as CHOICE_KEYS
from adapterfleet.data.sources import FILE_SPLIT_KEYS, HUB_SPLIT_KEYS
from adapterfleet.data.tasks import TASK_KEYS


@dataclass(frozen=True)
class Keys:
    """The keys one mapping takes (`allowed`) and the nodes of those that are mappings too
    (`below`); with `each`, the mapping's keys are names (tasks, systems) and each value is a
    mapping of `each`'s keys."""

    allowed: tuple[str, ...] = ()
    below: Mapping[str, Keys] = field(default_factory=dict)
    each: Keys | None = None


def refuse_unknown_keys(raw: Any, keys: Keys, where: str) -> None:
    """Refuse the first key of `raw` (and of the mappings below it) that `keys` does not take,
    naming where it was written (`budgets.quick.adapters: unknown key(s) ['trainin'] ...`).
    A value that is not a mapping is left to the schema, which refuses it where it is used."""
    if not isinstance(raw, Mapping):
        return
    if keys.each is not None:
        for name, value in raw.items():
            refuse_unknown_keys(value, keys.each, f"{where}.{name}")
        return
    refuse_unknown(raw, keys.allowed, where)
    for key, node in keys.below.items():
        if key in raw:
            refuse_unknown_keys(raw[key], node, f"{where}.{key}")


_TRAINING = Keys(TRAINING_KEYS)
_PER_NAME_TRAINING = Keys(each=_TRAINING)
# A split is a file's or a hub dataset's; which one the task's `hub` says, and a budget may
# change a task partly: its keys are checked against both here, and against the right one when
# the task is parsed.
_SPLIT = Keys(tuple(dict.fromkeys((*FILE_SPLIT_KEYS, *HUB_SPLIT_KEYS))))
_TASK = Keys(TASK_KEYS, {"train": _SPLIT, "dev": _SPLIT, "choices": Keys(CHOICE_KEYS)})
_GRID = Keys(tuple(f.name for f in dataclasses.fields(TaskGrid)))
_STAGES = {
    "adapters": Keys(
        ADAPTER_KEYS,
        {
            "training": _TRAINING,
            "task_training": _PER_NAME_TRAINING,
            "task_grid": Keys(each=_GRID),
        },
    ),
    "fusion": Keys(FUSION_KEYS, {"training": _TRAINING}),
    "baselines": Keys(
        BASELINE_KEYS, {"training": _TRAINING, "system_training": _PER_NAME_TRAINING}
    ),
    "resources": Keys(RESOURCE_KEYS),
}
# What a budget may change: the document's keys but budget and budgets themselves.
BUDGET_KEYS = Keys(
    tuple(key for key in TOP_KEYS if key not in ("budget", "budgets")),
    {**_STAGES, "base_model_layout": Keys(LAYOUT_KEYS), "tasks": Keys(each=_TASK)},
)
