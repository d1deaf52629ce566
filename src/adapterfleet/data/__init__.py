"""Tasks: declaring and loading them, the tokenisation cache, batching, and the demo suite.

Names are imported lazily, so ``import adapterfleet.data`` itself loads no heavy library.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from adapterfleet._lazy import lazy_exports

if TYPE_CHECKING:
    from adapterfleet.data.batching import (
        LengthGroupedBatchSampler,
        PadCollator,
        make_dataloader,
        padding_fraction,
    )
    from adapterfleet.data.cache import (
        TokenizedSplit,
        TokenizedTask,
        tokenize_task,
        tokenizer_fingerprint,
    )
    from adapterfleet.data.config_file import load_tasks_config, load_yaml, tasks_from_mapping
    from adapterfleet.data.demo import demo_suite_specs, generate_demo_suite
    from adapterfleet.data.errors import TaskError
    from adapterfleet.data.loading import TaskData, load_task
    from adapterfleet.data.sources import SplitSource
    from adapterfleet.data.tasks import TaskSpec

_WHERE = {
    "TaskError": "errors",
    "TaskSpec": "tasks",
    "SplitSource": "sources",
    "load_tasks_config": "config_file",
    "tasks_from_mapping": "config_file",
    "load_yaml": "config_file",
    "TaskData": "loading",
    "load_task": "loading",
    "TokenizedSplit": "cache",
    "TokenizedTask": "cache",
    "tokenize_task": "cache",
    "tokenizer_fingerprint": "cache",
    "LengthGroupedBatchSampler": "batching",
    "PadCollator": "batching",
    "make_dataloader": "batching",
    "padding_fraction": "batching",
    "generate_demo_suite": "demo",
    "demo_suite_specs": "demo",
}
__all__ = [
    "LengthGroupedBatchSampler",
    "PadCollator",
    "SplitSource",
    "TaskData",
    "TaskError",
    "TaskSpec",
    "TokenizedSplit",
    "TokenizedTask",
    "demo_suite_specs",
    "generate_demo_suite",
    "load_task",
    "load_tasks_config",
    "load_yaml",
    "make_dataloader",
    "padding_fraction",
    "tasks_from_mapping",
    "tokenize_task",
    "tokenizer_fingerprint",
]

__getattr__, __dir__ = lazy_exports(__name__, globals(), _WHERE)
