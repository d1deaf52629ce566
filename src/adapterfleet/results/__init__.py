"""The read side: a pipeline's status, the Table 1 / Figure 4 report, the paper's numbers, the
registered models (`models`: list, pull) and the rendering of the prune comparison
(`prune_report`).

Reads the tracking store through `adapterfleet.registry` only: no Ray, no torch, and nothing
that trains. `orchestration` (the write side) calls into this package, never the reverse.
Names are imported lazily, so ``import adapterfleet.results`` itself does no work.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from adapterfleet._lazy import lazy_exports

if TYPE_CHECKING:
    from adapterfleet.results.report import ReportResult, build_report
    from adapterfleet.results.status import (
        PipelineStatus,
        StatusPlan,
        pipeline_status,
        status_by_name,
    )

_WHERE = {
    "PipelineStatus": "status",
    "StatusPlan": "status",
    "pipeline_status": "status",
    "status_by_name": "status",
    "ReportResult": "report",
    "build_report": "report",
}
__all__ = [
    "PipelineStatus",
    "ReportResult",
    "StatusPlan",
    "build_report",
    "pipeline_status",
    "status_by_name",
]

__getattr__, __dir__ = lazy_exports(__name__, globals(), _WHERE)
