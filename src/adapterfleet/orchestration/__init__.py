"""The pipeline: stages, the registry gate, Ray job submission.

Names are imported lazily, so ``import adapterfleet.orchestration`` starts nothing and loads
neither ray nor mlflow.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from adapterfleet._lazy import lazy_exports

if TYPE_CHECKING:
    from adapterfleet.orchestration.sweep import resume_sweep, run_adapter_stage

_WHERE = {"run_adapter_stage": "sweep", "resume_sweep": "sweep"}
__all__ = ["resume_sweep", "run_adapter_stage"]

__getattr__, __dir__ = lazy_exports(__name__, globals(), _WHERE)
