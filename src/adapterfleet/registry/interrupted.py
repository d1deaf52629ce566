"""What Ctrl-C (or SIGTERM) leaves on a pipeline's experiment: a mark with the time, and the runs
the driver's jobs had open (trials, fusions, baselines) ended KILLED, as MLflow expects of a
stopped run. The next `run` reopens them (RUNNING again) and goes on from their checkpoints;
until then `status` reads the mark to call them interrupted rather than running or failed. The
next `run` or `sweep resume` takes the mark off, and ends KILLED what a driver killed at once
(kill -9) left RUNNING, which had no chance to end its runs itself."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING

from adapterfleet.registry.environment import run_driver
from adapterfleet.registry.heartbeat import driver_gone
from adapterfleet.registry.store import get_client, missing_store
from adapterfleet.registry.tags import TAG_DRIVER, TAG_INTERRUPTED, quote

if TYPE_CHECKING:
    from mlflow import MlflowClient

MARK_TIMEOUT_S = 5.0  # Ctrl-C is answered at once: an unreachable store is not waited for
# (uri, experiment name) whose store did not take this interruption's mark in time: a later call
# for the same interruption (the sweep's, the pipeline's, the CLI's) does not wait again
_unanswered: set[tuple[str, str]] = set()


def mark_interrupted(uri: str, name: str, timeout_s: float = MARK_TIMEOUT_S) -> bool:
    """Tag experiment `name` with the time of this interruption, then end KILLED the runs of
    this driver still open there (`end_open_runs`), all within `timeout_s`. Call it once the
    driver's Ray workers are gone (they can write no more). False when the store did not take
    the mark in time (the mark and the ends are a courtesy to `status` and the MLflow UI:
    nothing depends on them; a run left RUNNING is reopened all the same), when there is no
    store yet (none is created), or when this process never imported MLflow: then it opened
    no run and took off no earlier mark, and the import alone can take seconds."""
    if "mlflow" not in sys.modules or missing_store(uri) is not None:
        return False
    if (uri, name) in _unanswered:
        return False
    deadline = time.monotonic() + timeout_s
    marked, done = threading.Event(), threading.Event()

    def mark() -> None:
        try:
            client = get_client(uri)
            experiment = client.get_experiment_by_name(name)
            if experiment is not None:
                client.set_experiment_tag(
                    experiment.experiment_id, TAG_INTERRUPTED, str(int(time.time() * 1000))
                )
                marked.set()
                end_open_runs(client, experiment.experiment_id, run_driver(), deadline)
        except Exception:  # noqa: BLE001 - after Ctrl-C a failed courtesy says nothing
            pass
        finally:
            done.set()

    worker = threading.Thread(target=mark, name="adapterfleet-mark-interrupted", daemon=True)
    worker.start()
    worker.join(max(0.0, deadline - time.monotonic()))
    if not done.is_set():  # MLflow's own retries of one request take minutes: not waited for
        _unanswered.add((uri, name))
    return marked.is_set()


def mark_unanswered(uri: str, name: str) -> bool:
    """Whether the store did not answer this interruption's `mark_interrupted` in time: the
    runs the driver had open stay RUNNING there until the next run reopens them."""
    return (uri, name) in _unanswered


def end_open_runs(
    client: MlflowClient, experiment_id: str, driver: str, deadline: float | None = None
) -> list[str]:
    """End KILLED every run of the experiment still RUNNING that belongs to `driver` (its tag
    `adapterfleet.driver`: the trials of its sweeps, its fusions and baselines, wherever they
    ran); runs of other drivers (`fuse --wait` beside the sweep) are left alone. One search,
    then one update per run, until `deadline` (`time.monotonic()`). The ids ended."""
    clauses = f"attributes.status = 'RUNNING' AND tags.`{TAG_DRIVER}` = {quote(driver)}"
    ended = []
    for run in client.search_runs([experiment_id], filter_string=clauses, max_results=1000):
        if deadline is not None and time.monotonic() >= deadline:
            break
        client.set_terminated(run.info.run_id, "KILLED")
        ended.append(run.info.run_id)
    return ended


def end_orphaned_runs(uri: str, experiment_id: str) -> dict[str, int]:
    """End KILLED the runs of the experiment still RUNNING whose driver is gone (`driver_gone`:
    kill -9, the out-of-memory killer), as Ctrl-C would have: a run with other settings never
    reopens them, and they stayed RUNNING for good (the MLflow UI's spinner). A run with their
    settings reopens them all the same. Returns how many were ended, by driver."""
    client = get_client(uri)
    ours = run_driver()
    ended: dict[str, int] = {}
    found = client.search_runs(
        [experiment_id], filter_string="attributes.status = 'RUNNING'", max_results=1000
    )
    for run in found:
        driver = run.data.tags.get(TAG_DRIVER, "")
        if driver and driver != ours and driver_gone(driver):
            client.set_terminated(run.info.run_id, "KILLED")
            ended[driver] = ended.get(driver, 0) + 1
    return ended


def clear_interrupted(uri: str, experiment_id: str) -> None:
    """Take the mark off: the runs it spoke of are running again (and the store answers)."""
    _unanswered.difference_update({key for key in _unanswered if key[0] == uri})
    client = get_client(uri)
    if TAG_INTERRUPTED in client.get_experiment(experiment_id).tags:
        client.delete_experiment_tag(experiment_id, TAG_INTERRUPTED)


def interrupted_at(tags: Mapping[str, str]) -> float | None:
    """Seconds since 1970 of the interruption an experiment's tags record, else None."""
    text = tags.get(TAG_INTERRUPTED, "")
    return int(text) / 1000 if text.isdigit() else None
