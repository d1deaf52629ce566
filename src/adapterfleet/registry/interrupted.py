"""The mark Ctrl-C (or SIGTERM) leaves on a pipeline's experiment: the runs it stopped stay
RUNNING in MLflow (the next `run` reopens them and goes on from their checkpoints), so `status`
reads this tag to call them interrupted rather than running. The next `run` or `sweep resume`
takes it off."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Mapping

from adapterfleet.registry.store import get_client, missing_store
from adapterfleet.registry.tags import TAG_INTERRUPTED

MARK_TIMEOUT_S = 5.0  # Ctrl-C is answered at once: an unreachable store is not waited for


def mark_interrupted(uri: str, name: str, timeout_s: float = MARK_TIMEOUT_S) -> bool:
    """Tag experiment `name` with the time of this interruption; False when the store did not
    take it within `timeout_s` (the tag is a courtesy to `status`: nothing depends on it), when
    there is no store yet (none is created), or when this process never imported MLflow: then
    it opened no run and took off no earlier mark, and the import alone can take seconds."""
    if "mlflow" not in sys.modules or missing_store(uri) is not None:
        return False
    done = threading.Event()

    def mark() -> None:
        try:
            client = get_client(uri)
            experiment = client.get_experiment_by_name(name)
            if experiment is not None:
                client.set_experiment_tag(
                    experiment.experiment_id, TAG_INTERRUPTED, str(int(time.time() * 1000))
                )
                done.set()
        except Exception:  # noqa: BLE001 - after Ctrl-C a failed courtesy says nothing
            pass

    worker = threading.Thread(target=mark, name="adapterfleet-mark-interrupted", daemon=True)
    worker.start()
    worker.join(timeout_s)
    return done.is_set()


def clear_interrupted(uri: str, experiment_id: str) -> None:
    """Take the mark off: the runs it spoke of are running again."""
    client = get_client(uri)
    if TAG_INTERRUPTED in client.get_experiment(experiment_id).tags:
        client.delete_experiment_tag(experiment_id, TAG_INTERRUPTED)


def interrupted_at(tags: Mapping[str, str]) -> float | None:
    """Seconds since 1970 of the interruption an experiment's tags record, else None."""
    text = tags.get(TAG_INTERRUPTED, "")
    return int(text) / 1000 if text.isdigit() else None
