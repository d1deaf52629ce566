"""The folders of a pipeline's sweeps under `<storage>/ray/`: its own in place, earlier ones set
aside under `previous/` (shared by every pipeline of the storage), each with our note beside
Tune's state; which of them can be resumed, and moving them."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from adapterfleet.tuning.plan import SweepPlan

META_FILE = "adapterfleet_sweep.json"
PREVIOUS_DIR = "previous"


def read_meta(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads((path / META_FILE).read_text())
    except (OSError, ValueError):
        return None


def of_pipeline(meta: dict[str, Any], pipeline: str) -> bool:
    """Whether the sweep of note `meta` is pipeline `pipeline`'s: previous/ is shared by every
    pipeline of a storage, and another's sweep of the same settings was brought back and
    resumed (its versions registered under this name, their runs in the other's experiment)."""
    if "pipeline" in meta:
        return meta["pipeline"] == pipeline
    return str(meta.get("sweep_name", "")).startswith(f"{pipeline}-")  # a note before the key


def restorable(path: Path) -> bool:
    """Tune can restore the sweep at `path`: its tuner.pkl and an experiment state beside it
    (a Ctrl-C in the first moments of a sweep left the first alone, and every run after
    failed in Tune's restore, `KeyError: 'task'`, until the folder was deleted by hand)."""
    from ray.tune import Tuner

    return Tuner.can_restore(str(path)) and any(path.glob("experiment_state-*.json"))


def modified(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def place_experiment(plan: SweepPlan) -> str | None:
    """Put the experiment folder the plan runs in place: an earlier sweep's folder that will
    not be resumed is moved to previous/, and a sweep to resume that was set aside there is
    brought back. A line saying what moved, or None."""
    path = plan.experiment_path
    if plan.restore and plan.set_aside_at is None:
        return None
    said = []
    if path.exists():
        old = read_meta(path) or {}
        moved = set_aside(path, str(old.get("sweep_name") or path.name))
        said.append(f"set aside the earlier sweep {moved.name} in {moved}")
    if plan.set_aside_at is not None:
        shutil.move(str(plan.set_aside_at), str(path))
        said.append(f"brought back {plan.sweep_name} from {plan.set_aside_at} to resume it")
    return "; ".join(said) or None


def set_aside(path: Path, name: str) -> Path:
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    target = path.parent / PREVIOUS_DIR / name
    if target.exists():
        target = target.with_name(f"{target.name}-{stamp}")
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(str(path), str(target))
    return target
