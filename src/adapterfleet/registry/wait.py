"""Waiting until registered models carry an alias: the gate in front of fusion jobs."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from adapterfleet.registry.errors import RegistryTimeout, is_transient, safe_uri
from adapterfleet.registry.info import ModelVersionInfo
from adapterfleet.registry.models import _get_version
from adapterfleet.registry.store import get_client
from adapterfleet.registry.tags import BEST_ALIAS


def wait_for_models(
    uri: str,
    names: Sequence[str],
    alias: str = BEST_ALIAS,
    timeout_s: float = 3600.0,
    poll_s: float = 2.0,
    on_progress: Callable[[list[str]], None] | None = None,
    *,
    max_poll_s: float = 60.0,
    accept: Callable[[ModelVersionInfo], bool] | None = None,
) -> dict[str, ModelVersionInfo]:
    """Poll until every model in `names` has `alias`; return their versions by name.

    The poll interval starts at `poll_s` and doubles up to `max_poll_s`. After each poll
    `on_progress(missing_names)` is called (an empty list on success). A registry that is
    briefly unreachable counts as "still missing". When `timeout_s` passes, raises
    `RegistryTimeout` naming the missing models. `accept`: a version it refuses (one of
    other settings, about to be replaced) counts as missing.
    """
    wanted = list(dict.fromkeys(names))
    found: dict[str, ModelVersionInfo] = {}
    client = get_client(uri)
    deadline = time.monotonic() + timeout_s
    delay = poll_s
    while True:
        for name in wanted:
            if name in found:
                continue
            try:
                info = _get_version(client, name, alias, None)
            except Exception as exc:
                if not is_transient(exc):
                    raise
                info = None
            if info is not None and (accept is None or accept(info)):
                found[name] = info
        missing = [name for name in wanted if name not in found]
        if on_progress is not None:
            on_progress(missing)
        if not missing:
            return {name: found[name] for name in wanted}
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise RegistryTimeout(
                f"timed out after {timeout_s:g}s waiting for alias '{alias}' in "
                f"{safe_uri(uri)} on: {', '.join(missing)}; train/register them or raise "
                "the timeout",
                missing,
            )
        time.sleep(min(delay, remaining))
        delay = min(delay * 2, max(max_poll_s, poll_s))
