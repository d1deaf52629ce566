"""The lines `status` says beside its tables: a store that is not there, what Ctrl-C, SIGTERM
or a driver gone silent stopped, a registered version made for another plan than the one shown
(two configs of one pipeline name share its experiment and registry), or one whose run `mlflow
gc` purged."""

from __future__ import annotations

import json
import shlex
import time
from collections import Counter
from collections.abc import Mapping, Sequence

from adapterfleet.registry import ModelVersionInfo, RunRecord
from adapterfleet.registry.purged import purged_runs, purged_text
from adapterfleet.registry.tags import (
    BEST_ALIAS,
    TAG_BUDGET,
    TAG_CONFIG_HASH,
    TAG_LINEAGE,
    TAG_OVERRIDES,
    TAG_PRUNED_FROM,
    TAG_SWEEP,
)

INTERRUPTED = "INTERRUPTED"  # `status`'s word for a run Ctrl-C/SIGTERM stopped (KILLED)


def interruption(
    at: float | None,
    records: Sequence[RunRecord],
    hashes: Mapping[str, Sequence[str]] | None = None,
) -> str:
    """The line that says what Ctrl-C or SIGTERM stopped; "" when the last run was not stopped.
    `hashes`: the config's settings hashes by task, to tell a sweep of other settings that
    records no `-o` (an earlier version's) from one of the config's."""
    if at is None:
        return ""
    what = _stopped_runs(records)
    stopped = f": {what} stopped mid-way (counted as pending)" if what else ""
    flags = _started_with(records)
    other = _other_settings_sweep(records, hashes or {}) if not flags else ""
    if other:
        return (
            f"interrupted {_utc(at)}: sweep {other}, of other settings than this config's; run "
            "the command that started it again to continue it"
        )
    had = f" (it had {flags})" if flags else ""
    return f"interrupted {_utc(at)}{stopped}; run the same command again{had} to continue"


def _other_settings_sweep(records: Sequence[RunRecord], hashes: Mapping[str, Sequence[str]]) -> str:
    """The name of the newest stopped sweep when its runs' settings hashes are none of the
    config's (known by `hashes`); ""."""
    stopped = [r for r in records if r.kind == "sweep" and r.status == INTERRUPTED]
    newest = max(stopped, key=lambda r: r.start_time, default=None)
    if newest is None or not hashes:
        return ""
    name = newest.tags.get(TAG_SWEEP, "")
    runs = [r for r in stopped if r.tags.get(TAG_SWEEP) == name and r.tags.get(TAG_CONFIG_HASH)]
    ours = any(r.tags[TAG_CONFIG_HASH] in hashes.get(r.task or "", ()) for r in runs)
    return name if runs and not ours else ""


def _started_with(records: Sequence[RunRecord]) -> str:
    """The `--budget` and `-o` of the sweep the interruption stopped (its newest stopped sweep
    run records them), as a command line gives them; "" for none. Without them a `status` of
    the plain config read "run the same command again", and the plain command was another."""
    stopped = [r for r in records if r.kind == "sweep" and r.status == INTERRUPTED]
    if not stopped:
        return ""
    tags = max(stopped, key=lambda r: r.start_time).tags
    try:
        overrides = json.loads(tags.get(TAG_OVERRIDES) or "[]")
    except ValueError:
        return ""
    budget = [f"--budget {shlex.quote(tags[TAG_BUDGET])}"] if tags.get(TAG_BUDGET) else []
    given = [f"-o {shlex.quote(str(item))}" for item in overrides or () if isinstance(item, str)]
    return " ".join(budget + given)


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


def other_settings(what: str, differences: str, pipeline: str | None = None) -> str:
    """The line for a task's registered adapter (`what`: "adapter a v5 @best") trained with other
    settings than the config's (`differences`: " (key: old → new)", or ""); `pipeline`: the
    other pipeline that made it (`registry.info.made_by`), when one did."""
    if pipeline is not None:
        return (
            f"{what} was trained with other settings than this config's{differences}: made by "
            f"pipeline '{pipeline}', which shares this config's registry_prefix"
        )
    return (
        f"{what} was trained with other settings than this config's{differences}: made by "
        "another config of this pipeline name, or before this one changed"
    )


def fused_adapters(fusion: ModelVersionInfo) -> tuple[tuple[str, int], ...]:
    """(task, version) of each adapter a registered fusion fuses, from its `adapter.<task>=vN`
    tags, in its lineage tag's order; empty for a version without them."""
    fused = fusion.fused
    lineage = [part.partition(":")[0] for part in fusion.tags.get(TAG_LINEAGE, "").split(",")]
    order = [t for t in lineage if t in fused] + sorted(set(fused) - set(lineage))
    return tuple((task, fused[task]) for task in order)


def other_adapters(
    what: str,
    fused: Sequence[tuple[str, int]],
    planned: Sequence[str],
    source: str,
    fusion: ModelVersionInfo,
) -> str:
    """The line for a registered fusion (`what`: "fusion t v6 @best") of other adapters than
    the target `planned` (in `source`, "this config"); "" when they agree, when the version
    does not say, or for a version `prune` registered (fewer of them, by design)."""
    tasks = [task for task, _ in fused]
    extra = [task for task in tasks if task not in planned]
    missing = [task for task in planned if task not in tasks]
    if not tasks or (not extra and not missing) or (not extra and TAG_PRUNED_FROM in fusion.tags):
        return ""
    if extra and missing:
        how = f"fuses {', '.join(extra)} and not {', '.join(missing)}, unlike {source}"
    elif extra:
        how = f"fuses {', '.join(extra)}, which {source} does not list for it"
    else:
        how = f"does not fuse {', '.join(missing)}, which {source} lists for it"
    return (
        f"{what} {how}: made by another config of this pipeline name, or before its target changed"
    )


def adapters_moved_on(
    what: str, fused: Sequence[tuple[str, int]], best: Mapping[str, ModelVersionInfo]
) -> str:
    """The line for a registered fusion (`what`) whose adapters' `@best` moved on since it was
    trained (a sweep registered better ones): it read as current, though a run would train a
    fusion over the new ones; "" when they agree."""
    moved = [
        f"{task} v{version} → v{best[task].version}"
        for task, version in fused
        if task in best and best[task].version != version and BEST_ALIAS in best[task].aliases
    ]
    if not moved:
        return ""
    return (
        f"{what} fuses adapters whose @best has moved on ({', '.join(moved)}): the next run "
        "trains a fusion over the new ones"
    )


def purged_models(
    uri: str, models: Sequence[ModelVersionInfo], runs: Sequence[RunRecord]
) -> set[str]:
    """The runs of `models` that are no longer in the store; asked only of those that are not
    among the experiment's `runs` (no query at all when every one is)."""
    there = {run.run_id for run in runs}
    return purged_runs(uri, (model.run_id for model in models if model.run_id not in there))


def purged_note(what: str, model: ModelVersionInfo) -> str:
    """The line for a registered version (`what`: "adapter a v1 @best") whose run was purged:
    it counts as not registered, and the next run of the pipeline trains it again."""
    return f"{what}: {purged_text(model)}; the next run of the pipeline trains it again"
