"""The lines `status` says beside its tables: a store that is not there, what Ctrl-C, SIGTERM
or a driver gone silent stopped."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence

from adapterfleet.registry import RunRecord

INTERRUPTED = "INTERRUPTED"  # `status`'s word for a run Ctrl-C/SIGTERM left RUNNING


def interruption(at: float | None, records: Sequence[RunRecord]) -> str:
    """The line that says what Ctrl-C or SIGTERM stopped; "" when the last run was not stopped."""
    if at is None:
        return ""
    what = _stopped_runs(records)
    stopped = f": {what} stopped mid-way (counted as pending)" if what else ""
    return f"interrupted {_utc(at)}{stopped}; run the same command again to continue"


def silence(at: float | None, records: Sequence[RunRecord]) -> str:
    """The line that says what a driver gone without a word (killed at once, its node lost)
    left RUNNING; "" when its heartbeat is recent or it left nothing running."""
    what = _stopped_runs(records) if at is not None else ""
    if not what:
        return ""
    return (
        f"no heartbeat from the driver since {_utc(at)} (killed, or its node was lost): {what} "
        "stopped mid-way (counted as pending); run the same command again to continue"
    )


def _stopped_runs(records: Sequence[RunRecord]) -> str:
    """The runs counted as stopped, by kind: "2 trials, 1 fusion"; "" for none."""
    kinds = {"trial": "trial", "fusion": "fusion", "baseline": "baseline", "mt-a": "MT-A run"}
    stopped_runs = {
        (r.kind, r.trial_id or r.run_id)  # a trial reopened by a resume counts once
        for r in records
        if r.status == INTERRUPTED and r.kind in kinds
    }
    counts = Counter(kind for kind, _ in stopped_runs)
    counted = [(kinds[kind], counts[kind]) for kind in kinds if counts[kind]]
    return ", ".join(f"{n} {kind}{'s' if n > 1 else ''}" for kind, n in counted)


def _utc(at: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(at))


def no_store(where: str) -> str:
    """The line for a config whose SQLite or file store is not there: its pipeline has not run
    yet, or ran with its storage elsewhere (a relative `storage` read from another folder)."""
    return (
        f"no runs yet: no tracking store at {where}; run the pipeline, or point at the store it "
        "wrote (-o storage=DIR, --tracking-uri URI)"
    )
