"""Whether two registered fusions of one target can be ranked by their dev scores, for the
`best` alias: only where both score the same thing."""

from __future__ import annotations

from adapterfleet.registry.info import ModelVersionInfo, adapter_model_name
from adapterfleet.registry.models import get_version
from adapterfleet.registry.purged import run_purged
from adapterfleet.registry.tags import BEST_ALIAS, TAG_DATA_SHA256


def unranked_reason(
    uri: str, current: ModelVersionInfo, ours: ModelVersionInfo, target: str
) -> str | None:
    """Why `current` (the fusion under `best`) cannot be ranked against `ours` by their dev
    scores: it is a fusion on another base, or on other data files of the target (a score on
    another dev file; a train file fixed since), or over adapters whose `best` has moved on to
    those `ours` fuses (registered for other settings or data: `best` follows the adapters', as
    `status` says), or its run was purged (nothing of it can be pulled); None where both were
    tagged alike (or one not at all)."""
    if current.version != ours.version and run_purged(uri, current):
        return "whose run mlflow gc purged"
    base = current.tags.get("base_model")
    if base is not None and base != ours.tags.get("base_model"):
        return f"a fusion on {base}"
    data = current.tags.get(TAG_DATA_SHA256)
    if data is not None and ours.tags.get(TAG_DATA_SHA256) not in (None, data):
        return f"a fusion on other data of {target}"
    prefix = current.name.rpartition(f".fusion.{target}")[0]
    moved = [
        f"{task} v{then} → v{ours.fused[task]}"
        for task, then in current.fused.items()
        if ours.fused.get(task, then) != then
        and (best := get_version(uri, adapter_model_name(prefix, task), alias=BEST_ALIAS))
        and best.version == ours.fused[task]
    ]
    return (
        f"a fusion over adapters whose @best has moved on ({', '.join(moved)})" if moved else None
    )
