"""The pipeline's MLflow experiment: created on first use, restored from MLflow's trash."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from adapterfleet.console import Say, plural
from adapterfleet.registry.descriptions import TAG_NOTE, made_by
from adapterfleet.registry.store import default_artifact_location, get_client

if TYPE_CHECKING:
    from mlflow import MlflowClient
    from mlflow.entities import Experiment

_RUNS_PAGE = 1000


def ensure_experiment(
    uri: str,
    name: str,
    artifact_location: str | None = None,
    tags: Mapping[str, str] | None = None,
    *,
    say: Say | None = None,
) -> str:
    """Id of experiment `name`: created if missing, restored if deleted (said to `say`);
    `tags` set on it."""
    client = get_client(uri)
    experiment_id = _ensure_experiment(client, uri, name, artifact_location, say)
    for key, value in (tags or {}).items():
        client.set_experiment_tag(experiment_id, key, value)
    return experiment_id


def experiment_tags(uri: str, name: str) -> dict[str, str] | None:
    """The tags of experiment `name`; None when it does not exist (or is deleted)."""
    experiment = get_client(uri).get_experiment_by_name(name)
    if experiment is None or experiment.lifecycle_stage == "deleted":
        return None
    return dict(experiment.tags)


def _ensure_experiment(
    client: MlflowClient, uri: str, name: str, artifact_location: str | None, say: Say | None
) -> str:
    from mlflow.exceptions import MlflowException

    experiment = client.get_experiment_by_name(name)
    if experiment is None:  # never made, or purged from the trash by `mlflow gc`
        location = artifact_location or default_artifact_location(uri)
        try:
            note = {TAG_NOTE: f"Runs of the adapterfleet pipeline `{name}`.{made_by()}"}
            return str(client.create_experiment(name, artifact_location=location, tags=note))
        except MlflowException as exc:
            if exc.error_code != "RESOURCE_ALREADY_EXISTS":
                raise
            experiment = client.get_experiment_by_name(name)
            if experiment is None:  # pragma: no cover - created and deleted in between
                raise
    if experiment.lifecycle_stage == "deleted":
        _restore(client, experiment, say)
    return str(experiment.experiment_id)


def _restore(client: MlflowClient, experiment: Experiment, say: Say | None) -> None:
    """Take a deleted experiment out of MLflow's trash, and say so. Its runs, and the registered
    versions whose files they hold, are still there until `mlflow gc` purges them: a pipeline
    run again continues them. Done without a word, it undid an `mlflow experiments delete`
    its author never heard of."""
    experiment_id = str(experiment.experiment_id)
    client.restore_experiment(experiment_id)
    if say is not None:
        runs = plural(_count_runs(client, experiment_id), "run")
        say(
            f"experiment {experiment.name!r} (id {experiment_id}) was in MLflow's trash "
            f"(deleted, not purged by mlflow gc): restored it with its {runs}"
        )


def _count_runs(client: MlflowClient, experiment_id: str) -> int:
    """How many runs the (active) experiment holds, page by page."""
    count, token = 0, None
    while True:
        page = client.search_runs([experiment_id], max_results=_RUNS_PAGE, page_token=token)
        count += len(page)
        token = page.token
        if not token:
            return count
