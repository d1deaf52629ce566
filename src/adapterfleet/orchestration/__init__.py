"""The pipeline: stages, the registry gate, Ray job submission.

Names are imported lazily, so ``import adapterfleet.orchestration`` starts nothing and loads
neither ray nor mlflow.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from adapterfleet.orchestration.sweep import resume_sweep, run_adapter_stage

_WHERE = {"run_adapter_stage": "sweep", "resume_sweep": "sweep"}
__all__ = ["resume_sweep", "run_adapter_stage"]


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
    globals()[name] = value
    return value
