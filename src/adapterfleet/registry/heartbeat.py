"""The driver's heartbeat on a pipeline's experiment. While `run`, `sweep` or `fuse` works, a
daemon thread stamps the experiment with the time every `interval_s` seconds. A driver that
dies at once (SIGKILL, the kernel's out-of-memory killer, a lost head node) leaves no
interruption mark (`interrupted.py`) and its runs RUNNING; `status` reads a stamp older than
`STALE_BEATS` intervals as that driver's end and counts those runs pending, as after Ctrl-C.
The stamp is the driver's clock: `status` on a machine whose clock is minutes off misjudges it.
It also names the driver (host, process id, and the Ray job when `submit` started it) and, once
it stops beating, says so. A driver
that runs the sweep (`run`, `sweep`) stamps a second tag too, and a second such driver of the
same experiment is refused while the first beats (`refuse_second_driver`): both would resume
one Tune experiment, train the same trials and log each epoch twice. `fuse --wait` and `prune`
beside a sweep are not: waiting for the sweep's adapters is what `fuse --wait` is for, and two
fusions of one lineage already share the work (a lock on its folder).

On a tracking server (http, https) the same thread asks `/health` every `PROBE_S` seconds and
says when the server stops answering and when it answers again: trials and registrations wait
through MLflow's retries for minutes, and the console would say nothing meanwhile."""

from __future__ import annotations

import json
import os
import socket
import threading
import time
import urllib.parse
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

from adapterfleet.console import Say
from adapterfleet.disk import watch_library_logs
from adapterfleet.registry.errors import RegistryError, safe_uri
from adapterfleet.registry.store import check_tracking_uri, get_client, sqlite_path
from adapterfleet.registry.tags import TAG_HEARTBEAT, TAG_SWEEP_DRIVER

HEARTBEAT_ENV = "ADAPTERFLEET_HEARTBEAT_S"
DEFAULT_INTERVAL_S = 60.0
STALE_BEATS = 3  # a driver is taken for gone after this many intervals without a beat
PROBE_S = 15.0  # at most this long between two questions to a tracking server
PROBE_TIMEOUT_S = 5.0
ADDRESS_KEY = "adapterfleet.address"  # in a submitted job's metadata: where `submit` sent it


class _Beat:
    def __init__(self, uri: str, experiment_id: str, interval_s: float, say: Say | None) -> None:
        self.uri, self.experiment_id, self.interval_s = uri, experiment_id, interval_s
        self.say = say  # hears the server go silent and come back (None: nobody listens)
        self.server = urllib.parse.urlsplit(uri).scheme.lower() in ("http", "https")
        self.down_since: float | None = None
        self.users = 0
        self.sweep = False  # a user of the beat runs the sweep: `TAG_SWEEP_DRIVER` too
        self.stop = threading.Event()
        self.thread = threading.Thread(
            target=self._loop, name="adapterfleet-heartbeat", daemon=True
        )

    def write(self, end: str = "") -> None:
        """One stamp (`end`: "ended", the last); a failure is not raised (the stamp is a
        courtesy to `status`: no run stops for it), and a store that hiccups is tried again at
        the next beat."""
        job, at = submitted_job_id(), submitted_job_address()
        driver = f"{socket.gethostname()} {os.getpid()}" + (f" job={job}" if job else "")
        driver += f" at={at}" if job and at and " " not in at else ""
        stamp = f"{int(time.time() * 1000)} {self.interval_s:g} {driver} {end}".strip()
        tags = (TAG_HEARTBEAT, TAG_SWEEP_DRIVER) if self.sweep else (TAG_HEARTBEAT,)
        with suppress(Exception):
            client = get_client(self.uri)
            for tag in tags:
                client.set_experiment_tag(self.experiment_id, tag, stamp)

    def write_last(self) -> None:
        """The stamp that says the driver ended (the next driver need not wait for its beats
        to age), within `PROBE_TIMEOUT_S`: MLflow retries one request to a server that is down
        for minutes, which held Ctrl-C as long; a server found silent is not asked."""
        if self.down_since is not None:
            return
        writer = threading.Thread(
            target=self.write, args=("ended",), name="adapterfleet-last-beat", daemon=True
        )
        writer.start()
        writer.join(timeout=PROBE_TIMEOUT_S)

    def answers(self) -> bool:
        """Whether the store answers; for a server, a change is said (a SQLite or file store
        has nobody to wait for, and its hiccups are retried at the next beat)."""
        if not self.server or self.say is None:
            return True
        try:
            check_tracking_uri(self.uri, PROBE_TIMEOUT_S, create=False)
        except RegistryError as error:
            if self.down_since is None:
                self.down_since = time.monotonic()
                self.say(
                    f"{error} (the trials and registrations wait for it: MLflow retries each "
                    "request for minutes; finished epochs are kept on disk)"
                )
            return False
        if self.down_since is not None:
            silent = time.monotonic() - self.down_since
            self.say(
                f"tracking URI {safe_uri(self.uri)}: the server answers again after {silent:.0f} s"
            )
            self.down_since = None
        return True

    def _loop(self) -> None:
        last = time.monotonic()
        while not self.stop.wait(min(self.interval_s, PROBE_S) if self.server else self.interval_s):
            if self.answers() and time.monotonic() - last >= self.interval_s * 0.99:
                self.write()
                last = time.monotonic()


_BEATS: dict[tuple[str, str], _Beat] = {}
_LOCK = threading.Lock()


def submitted_job_id() -> str:
    """The Ray job this process is the entrypoint of, when `submit` started it (Ray hands the
    entrypoint its job's metadata in `RAY_JOB_CONFIG_JSON_ENV_VAR`), else ""."""
    return _job_metadata("job_submission_id")


def submitted_job_address() -> str:
    """The job server's address `submit` sent this process's job to (`ADDRESS_KEY` of its
    metadata; login masked), for the `adapterfleet stop` a second driver is pointed to; "" when
    not known."""
    return safe_uri(_job_metadata(ADDRESS_KEY))


def _job_metadata(key: str) -> str:
    with suppress(ValueError, TypeError, AttributeError):
        config = json.loads(os.environ.get("RAY_JOB_CONFIG_JSON_ENV_VAR") or "{}")
        return str((config.get("metadata") or {}).get(key) or "")
    return ""


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
def heartbeat(
    uri: str, experiment_id: str, say: Say | None = None, *, sweep: bool = False
) -> Iterator[None]:
    """Beat for experiment `experiment_id` while the block runs: the first stamp at once, then
    one per interval; `say` hears a tracking server go silent and answer again; `sweep`: the
    block runs the sweep, refused while another driver does. Nested blocks of one experiment
    share one thread (and the first `say` given)."""
    key = (uri, experiment_id)
    watch_library_logs()  # a stamp that finds the disk full: no SQLAlchemy traceback a minute
    with _LOCK:
        beat = _BEATS.get(key)
        fresh = beat is None
        if beat is None:
            beat = _Beat(uri, experiment_id, heartbeat_interval(), say)
        if sweep and not beat.sweep:
            refuse_second_driver(uri, experiment_id)
            beat.sweep = True
        if fresh or sweep:
            beat.write()
        if fresh:
            beat.thread.start()
            _BEATS[key] = beat
        beat.say = beat.say or say
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
            beat.thread.join(timeout=PROBE_TIMEOUT_S)
            beat.write_last()


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


@dataclass(frozen=True)
class SweepDriver:
    """A live driver of an experiment's sweep, as its stamp names it."""

    name: str  # "Ray job J, process P on H" or "process P on H"
    age_s: float  # since its last heartbeat
    gone_in_s: float  # until it is taken for gone, if no beat comes
    stop: str  # how its user stops it


def sweep_driver(uri: str, experiment_id: str) -> SweepDriver | None:
    """The driver that runs experiment `experiment_id`'s sweep, other than this process: one
    whose last stamp is younger than `STALE_BEATS` intervals, did not say it ended, and is not
    a process of this host that is gone (a driver killed here is known dead at once)."""
    try:
        tags = get_client(uri).get_experiment(experiment_id).tags
    except Exception:  # no experiment yet, a store that hiccups: nothing to go by
        return None
    parts = tags.get(TAG_SWEEP_DRIVER, "").split()
    if len(parts) < 4 or not parts[3].isdigit() or "ended" in parts[4:]:
        return None  # no stamp, one older than driver names, or one that says its driver ended
    last, interval, host, pid = int(parts[0]) / 1000, float(parts[1]), parts[2], int(parts[3])
    job = next((part[4:] for part in parts[4:] if part.startswith("job=")), "")
    at = next((part[3:] for part in parts[4:] if part.startswith("at=")), "")
    age = time.time() - last
    if age > STALE_BEATS * interval or (host == socket.gethostname() and not _alive(pid)):
        return None
    if host == socket.gethostname() and pid == os.getpid():
        return None
    name = f"Ray job {job}, process {pid} on {host}" if job else f"process {pid} on {host}"
    stop = f"adapterfleet stop {job}" + (f" --address {at}" if at else "")
    stop = stop if job else "Ctrl-C in its terminal"
    return SweepDriver(name, age, STALE_BEATS * interval - age, stop)


def refuse_second_driver(uri: str, experiment_id: str) -> None:
    """Raise `RegistryError` while another driver runs experiment `experiment_id`'s sweep
    (`sweep_driver`)."""
    driver = sweep_driver(uri, experiment_id)
    if driver is None:
        return
    raise RegistryError(
        f"another adapterfleet driver runs this pipeline's sweep ({driver.name}, its last "
        f"heartbeat {driver.age_s:.0f} s ago): two would train the same trials twice; let it "
        f"finish, stop it ({driver.stop}), or, if it was killed on another machine, run again "
        f"in {driver.gone_in_s:.0f} s, when it is taken for gone (a config of another storage "
        "that shares this pipeline's name, another user's, collides so too: give it its own "
        "name)"
    )


def driver_gone(driver: str) -> bool:
    """Whether the driver a run's `adapterfleet.driver` tag names (`<host> <pid>`) is known to
    have ended: a process of this host that no longer runs. One on another host is not known
    (False): its experiment's stamp names only the latest driver."""
    host, _, pid = driver.partition(" ")
    return host == socket.gethostname() and pid.isdigit() and not _alive(int(pid))


def _alive(pid: int) -> bool:
    """Whether process `pid` of this host runs (a zombie, killed and not yet reaped, does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process
    with suppress(OSError, IndexError):
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        return state not in ("Z", "X")
    return True


def refuse_second_driver_of(uri: str, name: str) -> None:
    """`refuse_second_driver` for the experiment named `name`, where the store has one (before
    a driver starts Ray or writes anything)."""
    experiment_id = _experiment_id(uri, name)
    if experiment_id is not None:
        refuse_second_driver(uri, experiment_id)


def sweep_driver_of(uri: str, name: str) -> SweepDriver | None:
    """`sweep_driver` for the experiment named `name`; None where the store has none."""
    experiment_id = _experiment_id(uri, name)
    return None if experiment_id is None else sweep_driver(uri, experiment_id)


def _experiment_id(uri: str, name: str) -> str | None:
    db = sqlite_path(uri)
    if db is not None and not db.is_file():
        return None
    try:
        experiment = get_client(uri).get_experiment_by_name(name)
    except Exception:  # a store that hiccups: the heartbeat checks again when it starts
        return None
    return None if experiment is None else str(experiment.experiment_id)
