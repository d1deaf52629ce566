"""wait_for_models: the registry gate in front of fusion jobs (real SQLite store)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from adapterfleet.registry import (
    RegistryTimeout,
    adapter_model_name,
    register_version,
    wait_for_models,
)

LoggedAdapter = Callable[..., tuple[str, Path]]


def test_wait_returns_when_another_thread_registers(
    sqlite_uri: str,
    sqlite_experiment: str,
    logged_adapter: LoggedAdapter,
    new_name: Callable[[str], str],
) -> None:
    prefix = new_name("w")
    ready, late = adapter_model_name(prefix, "rte"), adapter_model_name(prefix, "mrpc")
    run_id, weights = logged_adapter(sqlite_uri, sqlite_experiment)
    register_version(sqlite_uri, ready, run_id, "adapter", weights)

    def register_later() -> None:
        time.sleep(1.0)
        register_version(sqlite_uri, late, run_id, "adapter", weights)

    progress: list[list[str]] = []
    worker = threading.Thread(target=register_later)
    start = time.monotonic()
    worker.start()
    try:
        found = wait_for_models(
            sqlite_uri, [ready, late], timeout_s=30, poll_s=0.1, on_progress=progress.append,
            max_poll_s=0.4,
        )  # fmt: skip
    finally:
        worker.join()
    assert time.monotonic() - start >= 0.9
    assert list(found) == [ready, late]
    assert found[late].version == 1 and found[late].aliases == ("best",)
    assert progress[0] == [late] and progress[-1] == []
    assert 3 <= len(progress) <= 15  # polled repeatedly, with back-off


def test_wait_times_out_naming_missing_models(
    sqlite_uri: str,
    sqlite_experiment: str,
    logged_adapter: LoggedAdapter,
    new_name: Callable[[str], str],
) -> None:
    prefix = new_name("w")
    present, absent = adapter_model_name(prefix, "rte"), adapter_model_name(prefix, "never")
    run_id, weights = logged_adapter(sqlite_uri, sqlite_experiment)
    # Registered but without the alias: still missing for the gate.
    unaliased = adapter_model_name(prefix, "noalias")
    register_version(sqlite_uri, present, run_id, "adapter", weights)
    register_version(sqlite_uri, unaliased, run_id, "adapter", weights, alias=None)
    start = time.monotonic()
    with pytest.raises(RegistryTimeout) as err:
        wait_for_models(sqlite_uri, [present, absent, unaliased], timeout_s=1.0, poll_s=0.2)
    assert 0.9 <= time.monotonic() - start < 5
    assert err.value.missing == (absent, unaliased)
    message = str(err.value)
    assert absent in message and unaliased in message and present not in message
