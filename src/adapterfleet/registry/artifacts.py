"""Files taken out of a run that is logged to again: the report run is one per experiment, and
`log_artifacts` only adds, so a figure the latest report no longer draws stayed beside a table
that said it was not drawn."""

from __future__ import annotations

from collections.abc import Collection

from adapterfleet.registry.errors import call_with_retry
from adapterfleet.registry.runs import DEFAULT_RETRY_TIMEOUT_S
from adapterfleet.registry.store import get_client


def remove_artifacts(uri: str, run_id: str, names: Collection[str]) -> list[str]:
    """Delete the files among `names` at the root of the run's artifacts; those deleted."""
    from mlflow.store.artifact.artifact_repository_registry import get_artifact_repository

    client = get_client(uri)
    present = call_with_retry(
        lambda: {f.path for f in client.list_artifacts(run_id) if not f.is_dir},
        what=f"list the artifacts of run {run_id}",
        timeout_s=DEFAULT_RETRY_TIMEOUT_S,
    )
    stale = sorted(set(names) & present)
    if stale:
        root = client.get_run(run_id).info.artifact_uri
        repository = get_artifact_repository(root, tracking_uri=uri)
        for name in stale:
            call_with_retry(
                lambda name=name: repository.delete_artifacts(name),
                what=f"delete {name} from run {run_id}",
                timeout_s=DEFAULT_RETRY_TIMEOUT_S,
            )
    return stale
