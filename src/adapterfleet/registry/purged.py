"""Registered versions whose run is no longer in the tracking store.

`mlflow gc` purges the runs of a deleted experiment and their files, but the model registry
keeps every version of them: such a version looks registered and cannot be pulled. The plan of
a pipeline run treats it as not registered (it trains it again), and `status` says so. Asked
for many runs at once: one query on a SQLite store, a few paged requests to a tracking server
(every experiment, then the runs among them), else MLflow's client the same way. A deleted run
still in MLflow's trash is there (its files too): only a purged one counts.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from adapterfleet.registry import rest_read, sqlite_read
from adapterfleet.registry.info import ModelVersionInfo, info_from_mlflow
from adapterfleet.registry.models import paged, versions_tagged
from adapterfleet.registry.store import get_client, sqlite_path
from adapterfleet.registry.tags import quote

RUNS_CHUNK = 200  # run ids per `run_id IN (...)` filter
_PAGE = 1000


def purged_runs(uri: str, run_ids: Iterable[str | None]) -> set[str]:
    """The ids among `run_ids` of runs the tracking store at `uri` no longer holds at all."""
    wanted = sorted({run for run in run_ids if run})
    if not wanted:
        return set()
    db = sqlite_path(uri)
    try:
        if db is not None and db.is_file():
            return set(wanted) - sqlite_read.existing_runs(db, wanted)
        if rest_read.is_http(uri):
            server = rest_read.Server.from_uri(uri)
            return set(wanted) - rest_read.existing_runs(server, wanted)
    except sqlite_read.Unreadable:
        pass  # not a store the direct reads know: ask MLflow
    return set(wanted) - _existing_runs(get_client(uri), wanted)


def purged_versions(uri: str, versions: Iterable[ModelVersionInfo]) -> set[tuple[str, int]]:
    """(name, version) of each of `versions` whose run is no longer in the store."""
    versions = list(versions)
    gone = purged_runs(uri, (info.run_id for info in versions))
    return {(info.name, info.version) for info in versions if info.run_id in gone}


def run_purged(uri: str, info: ModelVersionInfo) -> bool:
    """Whether the run of version `info` is no longer in the store (`purged_runs`)."""
    return bool(info.run_id) and info.run_id in purged_runs(uri, [info.run_id])


def registered_by_tag(
    uri: str, name: str, tag: str, value: str
) -> tuple[ModelVersionInfo | None, ModelVersionInfo | None]:
    """`find_version_by_tag` that passes over versions whose run was purged: (the lowest
    version of `name` tagged `tag`=`value` whose run is there, the lowest one whose run is not),
    None for none."""
    client = get_client(uri)
    found = versions_tagged(client, name, tag, value)
    gone = purged_runs(uri, (mv.run_id for mv in found))
    live = next((mv for mv in found if mv.run_id not in gone), None)
    dead = next((mv for mv in found if mv.run_id in gone), None)
    return tuple(  # type: ignore[return-value]
        info_from_mlflow(client.get_model_version(name, str(mv.version))) if mv else None
        for mv in (live, dead)
    )


def purged_text(info: ModelVersionInfo, store: str = "") -> str:
    """What the plan, `status` and a pull say of a version whose run was purged, after naming
    it and before what happens to it: `its run 7811fe8d... is no longer in the tracking store,
    ...`; `store`: the store's URI (masked) to name, if any."""
    where = f"the tracking store {store}" if store else "the tracking store"
    return (
        f"its run {info.run_id} is no longer in {where}, nor are its files (deleted, then "
        "purged by mlflow gc)"
    )


def _existing_runs(client: Any, run_ids: list[str]) -> set[str]:
    """`sqlite_read.existing_runs` through MLflow's client: the runs of every experiment
    (deleted ones too) among `run_ids`."""
    from mlflow.entities import ViewType

    def experiments(_: str, **page: Any) -> Any:
        return client.search_experiments(view_type=ViewType.ALL, **page)

    ids = [experiment.experiment_id for experiment in paged(experiments, "", _PAGE)]

    def runs(filter_string: str, **page: Any) -> Any:
        return client.search_runs(
            ids, filter_string=filter_string, run_view_type=ViewType.ALL, **page
        )

    found: set[str] = set()
    for start in range(0, len(run_ids), RUNS_CHUNK) if ids else ():
        listed = ", ".join(quote(run) for run in run_ids[start : start + RUNS_CHUNK])
        found |= {run.info.run_id for run in paged(runs, f"attributes.run_id IN ({listed})", _PAGE)}
    return found
