"""The driver's heartbeat on a pipeline's experiment. While `run`, `sweep` or `fuse` works, a
daemon thread stamps the experiment with the time every `interval_s` seconds. A driver that
dies at once (SIGKILL, the kernel's out-of-memory killer, a lost head node) leaves no
interruption mark (`interrupted.py`) and its runs RUNNING; `status` reads a stamp older than
`STALE_BEATS` intervals as that driver's end and counts those runs pending, as after Ctrl-C.
The stamp is the driver's clock: `status` on a machine whose clock is minutes off misjudges it."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress

from adapterfleet.registry.errors import RegistryError
from adapterfleet.registry.store import get_client
from adapterfleet.registry.tags import TAG_HEARTBEAT

HEARTBEAT_ENV = "ADAPTERFLEET_HEARTBEAT_S"
DEFAULT_INTERVAL_S = 60.0
STALE_BEATS = 3  # a driver is taken for gone after this many intervals without a beat


class _Beat:
    def __init__(self, uri: str, experiment_id: str, interval_s: float) -> None:
        self.uri, self.experiment_id, self.interval_s = uri, experiment_id, interval_s
        self.users = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(
            target=self._loop, name="adapterfleet-heartbeat", daemon=True
        )

    def write(self) -> None:
        """One stamp; a failure is not raised (the stamp is a courtesy to `status`: no run
        stops for it), and a store that hiccups is tried again at the next beat."""
        stamp = f"{int(time.time() * 1000)} {self.interval_s:g}"
        with suppress(Exception):
            get_client(self.uri).set_experiment_tag(self.experiment_id, TAG_HEARTBEAT, stamp)

    def _loop(self) -> None:
        while not self.stop.wait(self.interval_s):
            self.write()


_BEATS: dict[tuple[str, str], _Beat] = {}
_LOCK = threading.Lock()


def heartbeat_interval() -> float:
    """Seconds between beats: `ADAPTERFLEET_HEARTBEAT_S`, else 60."""
    text = os.environ.get(HEARTBEAT_ENV, "").strip()
    if not text:
        return DEFAULT_INTERVAL_S
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not 0 < value < float("inf"):
        raise RegistryError(
            f"{HEARTBEAT_ENV}={text!r}: expected the seconds between the driver's heartbeats, "
            f"a number above 0 (unset it for the default, {DEFAULT_INTERVAL_S:g})"
        )
    return value


@contextmanager
def heartbeat(uri: str, experiment_id: str) -> Iterator[None]:
    """Beat for experiment `experiment_id` while the block runs: the first stamp at once, then
    one per interval. Nested blocks of one experiment share one thread."""
    key = (uri, experiment_id)
    with _LOCK:
        beat = _BEATS.get(key)
        if beat is None:
            beat = _Beat(uri, experiment_id, heartbeat_interval())
            beat.write()
            beat.thread.start()
            _BEATS[key] = beat
        beat.users += 1
    try:
        yield
    finally:
        with _LOCK:
            beat.users -= 1
            if beat.users == 0:
                del _BEATS[key]
                beat.stop.set()
        if beat.stop.is_set():
            beat.thread.join(timeout=5.0)


def silent_since(tags: Mapping[str, str], now: float | None = None) -> float | None:
    """Seconds since 1970 of the last beat an experiment's tags record when it is older than
    `STALE_BEATS` intervals (its driver is gone), else None (alive, or no stamp at all)."""
    parts = tags.get(TAG_HEARTBEAT, "").split()
    try:
        last, interval = int(parts[0]) / 1000, float(parts[1])
    except (IndexError, ValueError):
        return None
    now = time.time() if now is None else now
    return last if now - last > STALE_BEATS * interval else None
