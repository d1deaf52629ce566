"""The tidy-up of a sweep's parent run whose task got registered while its driver stopped
before the run was done with: the next run's plan ends it and fills in its summary."""

from __future__ import annotations

import time
from collections.abc import Callable

from adapterfleet.registry.runs import _find_run
from adapterfleet.registry.store import get_client
from adapterfleet.registry.tags import TAG_KIND, TAG_SWEEP, TAG_TASK


def finish_sweep_run(
    uri: str,
    experiment_id: str,
    sweep_name: str,
    task: str,
    summary: Callable[[], tuple[dict[str, float], dict[str, str]]] | None = None,
) -> bool:
    """Tidy the parent run of a sweep whose task is registered, where its driver stopped
    between the registration and the run's end (Ctrl-C: KILLED; a kill -9: RUNNING): end it
    FINISHED, and log `summary`'s (metrics, tags) where the run has no `registered_version`
    yet. Whether it changed anything."""
    client = get_client(uri)
    run_id = _find_run(
        client, experiment_id, {TAG_KIND: "sweep", TAG_SWEEP: sweep_name, TAG_TASK: task}
    )
    if run_id is None:
        return False
    run = client.get_run(run_id)
    bare = summary is not None and "registered_version" not in run.data.tags
    if bare and summary is not None:
        from mlflow.entities import Metric, RunTag

        metrics, tags = summary()
        stamp = int(time.time() * 1000)
        client.log_batch(
            run_id,
            metrics=[Metric(key, value, stamp, 0) for key, value in metrics.items()],
            tags=[RunTag(key, value) for key, value in tags.items()],
        )
    if run.info.status in ("KILLED", "RUNNING"):
        client.set_terminated(run_id, "FINISHED")
        return True
    return bare
