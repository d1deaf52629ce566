"""The REST reader behind `status` on a tracking server gives what MLflow's own client gives on the
same real `mlflow server` (runs of every kind, kept tags, latest metrics incl. NaN and 0, deleted
runs and versions, aliases, a `_` in the prefix, several pages), answers `None` for what is not
there, falls back to the client when the server answers something it does not know, and turns
no answer into one line."""

from __future__ import annotations

import base64
import http.client
import math
import shutil
import socket
import ssl
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
from mlflow import MlflowClient

from adapterfleet.registry import (
    TAG_KIND,
    TAG_PARENT_RUN,
    TAG_SWEEP,
    TAG_TASK,
    TAG_TRIAL_ID,
    RegistryError,
    RunRecord,
    experiment_runs,
    list_models,
    rest_read,
)
from adapterfleet.registry import status as registry_status
from adapterfleet.registry.sqlite_read import Unreadable
from adapterfleet.registry.status import experiment_runs_and_tags

pytestmark = pytest.mark.integration


def new_name(stem: str) -> str:
    return f"{stem}-{uuid.uuid4().hex[:8]}"


KINDS = [  # (kind, final status); the trials belong to the sweep
    ("sweep", "RUNNING"),
    ("trial", "FINISHED"),
    ("trial", "FAILED"),
    ("trial", "RUNNING"),
    ("fusion", "KILLED"),
    ("trial", "FINISHED"),
    ("baseline", "FINISHED"),
    ("trial", "SCHEDULED"),
]


@dataclass(frozen=True)
class Fleet:
    uri: str
    experiment: str  # its name
    prefix: str
    run_ids: tuple[str, ...]  # active runs, oldest first


@pytest.fixture(scope="module")
def fleet(mlflow_server: str) -> Fleet:
    """Runs and registered models written by MLflow's client through the real server."""
    uri = mlflow_server
    client = MlflowClient(uri, registry_uri=uri)
    name = new_name("rest")
    experiment = client.create_experiment(name, tags={"adapterfleet.pipeline": "{}", "team": "a"})
    other = client.create_experiment(new_name("other"))
    client.create_run(other, tags={TAG_KIND: "trial", TAG_TRIAL_ID: "elsewhere"})
    sweep = ""
    run_ids: list[str] = []
    starts: list[int] = []
    for index, (kind, status) in enumerate(KINDS):
        tags = {TAG_KIND: kind, TAG_TASK: f"t{index % 2}", "noise": "x"}
        if kind == "sweep":
            tags[TAG_SWEEP] = "sweep-1"
        if kind == "trial":
            tags |= {TAG_TRIAL_ID: f"trial-{index}", TAG_PARENT_RUN: sweep}
        start = 1000 + min(index, 6)  # the last two start together: ordered by run id
        run = client.create_run(experiment, tags=tags, start_time=start).info.run_id
        sweep = sweep or run
        client.log_param(run, "lr", 0.001)
        client.log_metric(run, "dev_accuracy", 0.5 + index / 10, step=0)
        client.log_metric(run, "dev_accuracy", 0.6 + index / 10, step=1)
        client.log_metric(run, "loss", math.nan)
        client.log_metric(run, "zero", 0.0)
        client.log_metric(run, "neg", -2.5)
        if status == "SCHEDULED":
            client.update_run(run, status)
        elif status != "RUNNING":
            client.set_terminated(run, status)
        run_ids.append(run)
        starts.append(start)
    gone = client.create_run(experiment, tags={TAG_KIND: "trial", TAG_TRIAL_ID: "gone"})
    client.delete_run(gone.info.run_id)
    prefix = new_name("p_x").replace("-", "_")
    decoy = prefix.replace("p_x", "pyx", 1)  # matches `p_x%` in SQL, not the prefix
    names = [f"{prefix}.adapter.{task}" for task in ("rte", "mrpc", "sst2")]
    for model in [*names, f"{decoy}.adapter.rte", f"{prefix}.fusion.rte"]:
        client.create_registered_model(model)
        for version in (1, 2, 3):
            tags = {"sha256": f"h{version}", "k": model}
            source = f"runs:/{run_ids[version]}/adapter"
            client.create_model_version(model, source, run_id=run_ids[version], tags=tags)
    client.set_registered_model_alias(f"{prefix}.adapter.rte", "best", "2")
    client.set_registered_model_alias(f"{prefix}.adapter.rte", "pruned-1", "2")
    client.set_registered_model_alias(f"{prefix}.adapter.rte", "old", "1")
    client.set_registered_model_alias(f"{prefix}.adapter.mrpc", "old", "1")
    client.set_registered_model_alias(f"{prefix}.fusion.rte", "best", "3")
    client.delete_model_version(f"{prefix}.adapter.mrpc", "3")
    oldest_first = sorted(zip(starts, run_ids, strict=True))
    return Fleet(uri, name, prefix, tuple(run for _, run in oldest_first))


def _plain(found: tuple[list[RunRecord], dict[str, str]] | None) -> Any:
    """Runs and tags as comparable data (NaN is not equal to itself)."""
    assert found is not None
    runs, tags = found
    return [(r.run_id, r.status, r.start_time, r.tags, _metrics(r)) for r in runs], tags


def _metrics(run: RunRecord) -> dict[str, float | str]:
    return {k: "NaN" if math.isnan(v) else v for k, v in run.metrics.items()}


def _by_mlflow(fleet: Fleet, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, dict[str, Any]]:
    """The same calls with the REST reader unavailable: MLflow's client answers."""

    def unreadable(uri: str, environ: object = None) -> None:
        raise Unreadable("test: take the MLflow path")

    with monkeypatch.context() as patch:
        patch.setattr(rest_read.Server, "from_uri", unreadable)
        found = experiment_runs_and_tags(fleet.uri, fleet.experiment)
        models = {k: list_models(fleet.uri, fleet.prefix, k) for k in ("adapter", "fusion")}
        models["every"] = list_models(fleet.uri, fleet.prefix, "adapter", every=True)
    return found, models


def test_runs_tags_and_models_equal_what_mlflow_reads(
    fleet: Fleet, monkeypatch: pytest.MonkeyPatch
) -> None:
    found = experiment_runs_and_tags(fleet.uri, fleet.experiment, page=3)  # three pages
    models = {k: list_models(fleet.uri, fleet.prefix, k) for k in ("adapter", "fusion")}
    models["every"] = list_models(fleet.uri, fleet.prefix, "adapter", every=True)
    slow, slow_models = _by_mlflow(fleet, monkeypatch)
    assert found is not None and slow is not None
    (runs, tags), (slow_runs, slow_tags) = found, slow

    assert tags == slow_tags == {"adapterfleet.pipeline": "{}", "team": "a"}
    assert [r.run_id for r in runs] == [r.run_id for r in slow_runs] == list(fleet.run_ids)
    assert _plain(found) == _plain(slow)  # status, start time, kept tags, latest metrics
    assert _metrics(runs[1]) == {"dev_accuracy": 0.7, "loss": "NaN", "zero": 0.0, "neg": -2.5}
    kinds = [r.kind for r in runs]
    assert kinds[:6] == ["sweep", "trial", "trial", "trial", "fusion", "trial"]
    assert sorted(kinds[6:]) == ["baseline", "trial"]  # same start time: by run id
    assert {r.status for r in runs} == {"RUNNING", "FINISHED", "FAILED", "KILLED", "SCHEDULED"}
    assert runs[1].parent_run_id == runs[0].run_id and "noise" not in runs[0].tags

    assert models == slow_models
    adapters = {info.name: info for info in models["adapter"]}
    p = fleet.prefix
    assert sorted(adapters) == [f"{p}.adapter.mrpc", f"{p}.adapter.rte", f"{p}.adapter.sst2"]
    rte = adapters[f"{p}.adapter.rte"]
    assert (rte.version, rte.aliases) == (2, ("best", "pruned-1"))
    assert rte.tags == {"sha256": "h2", "k": f"{p}.adapter.rte"}
    assert rte.source == f"runs:/{fleet.run_ids[2]}/adapter" and rte.created_ms
    assert adapters[f"{p}.adapter.mrpc"].version == 2  # v3 deleted, no best: the latest live
    assert adapters[f"{p}.adapter.mrpc"].aliases == ()
    assert [(m.version, m.aliases) for m in models["fusion"]] == [(3, ("best",))]
    every = [(m.name.rsplit(".", 1)[1], m.version) for m in models["every"]]  # `adapters --all`
    assert every[:2] == [("mrpc", 2), ("mrpc", 1)] and ("rte", 2) in every  # v3 deleted


def test_paged_model_searches_equal_one_page(fleet: Fleet) -> None:
    server = rest_read.Server.from_uri(fleet.uri)
    whole = rest_read.model_versions(server, f"{fleet.prefix}.adapter.")
    paged = rest_read.model_versions(server, f"{fleet.prefix}.adapter.", page=2, models_page=1)
    assert sorted(paged) == sorted(whole) and len(whole) == 3
    for name, (versions, aliases) in whole.items():
        assert paged[name][1] == aliases
        assert sorted(paged[name][0], key=lambda v: v.version) == sorted(
            versions, key=lambda v: v.version
        )
    rte = {v.version: v for v in whole[f"{fleet.prefix}.adapter.rte"][0]}
    assert (rte[1].aliases, rte[2].aliases, rte[3].aliases) == (("old",), ("best", "pruned-1"), ())
    assert sorted(len(v) for v, _ in whole.values()) == [2, 3, 3]  # mrpc v3 deleted


def test_absent_and_deleted_experiments_are_none(fleet: Fleet) -> None:
    assert experiment_runs(fleet.uri, new_name("no-such-pipeline")) is None
    client = MlflowClient(fleet.uri)
    deleted = new_name("deleted")
    client.delete_experiment(client.create_experiment(deleted))
    assert experiment_runs(fleet.uri, deleted) is None
    empty = new_name("empty")
    client.create_experiment(empty)
    assert experiment_runs_and_tags(fleet.uri, empty) == ([], {})
    assert list_models(fleet.uri, new_name("nobody"), "adapter") == []


def test_which_runs_are_gone_equals_what_mlflow_reads(
    fleet: Fleet, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`status` asks whether the runs of registered versions are still there (`mlflow gc`
    purges a deleted experiment's runs, the registry keeps their versions): a run of another
    experiment or one in the trash is there, an id the server does not know is not; a few
    requests in all, paged, as MLflow's client answers."""
    from adapterfleet.registry import purged

    client = MlflowClient(fleet.uri)
    elsewhere = client.create_run(client.create_experiment(new_name("elsewhere"))).info.run_id
    trashed = client.create_run(client.create_experiment(new_name("trashed"))).info.run_id
    client.delete_run(trashed)
    unknown = uuid.uuid4().hex
    asked = [*fleet.run_ids, elsewhere, trashed, unknown, None]
    assert purged.purged_runs(fleet.uri, asked) == {unknown}
    server = rest_read.Server.from_uri(fleet.uri)
    known = [r for r in asked if r and r != unknown]
    monkeypatch.setattr(rest_read, "RUN_IDS_CHUNK", 2)
    assert rest_read.existing_runs(server, [*known, unknown], page=1) == set(known)

    def unreadable(uri: str, environ: object = None) -> None:
        raise Unreadable("test: take the MLflow path")

    monkeypatch.setattr(rest_read.Server, "from_uri", unreadable)
    monkeypatch.setattr(purged, "RUNS_CHUNK", 2)
    assert purged.purged_runs(fleet.uri, asked) == {unknown}


# --------------------------------------------------------------------------- a proxy in between


class Proxy:
    """Forwards every request to the server; records each request's headers; answers the REST
    reader (urllib's user agent) with `answer` for paths containing `garble`."""

    def __init__(
        self,
        target: str,
        garble: str = "",
        answer: bytes = b"",
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.target = urlsplit(target).netloc
        self.garble, self.answer = garble, answer
        self.seen: list[tuple[str, str, dict[str, str]]] = []  # (agent, path, headers)
        self.garbled = 0
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - the stdlib's naming
                self._forward()

            def do_POST(self) -> None:  # noqa: N802
                self._forward()

            def _forward(self) -> None:
                agent = self.headers.get("User-Agent", "")
                proxy.seen.append((agent, self.path, dict(self.headers)))
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if proxy.garble and proxy.garble in self.path and agent.startswith("Python-url"):
                    proxy.garbled += 1
                    self._reply(200, proxy.answer, "text/html")
                    return
                upstream = http.client.HTTPConnection(proxy.target, timeout=60)
                headers = {k: v for k, v in self.headers.items() if k.lower() != "host"}
                upstream.request(self.command, self.path, body=body or None, headers=headers)
                answer = upstream.getresponse()
                self._reply(answer.status, answer.read(), answer.getheader("Content-Type", ""))
                upstream.close()

            def _reply(self, status: int, data: bytes, kind: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        if tls is not None:  # https on the outside, plain http to the server behind
            self.httpd.socket = tls.wrap_socket(self.httpd.socket, server_side=True)
        scheme = "https" if tls is not None else "http"
        self.uri = f"{scheme}://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def proxy(mlflow_server: str) -> Iterator[Callable[..., Proxy]]:
    made: list[Proxy] = []

    def make(garble: str = "", answer: bytes = b"", tls: ssl.SSLContext | None = None) -> Proxy:
        made.append(Proxy(mlflow_server, garble, answer, tls))
        return made[-1]

    yield make
    for one in made:
        one.close()


@pytest.mark.parametrize(
    "garble, answer",
    [
        ("runs/search", b"<html>please log in</html>"),
        ("experiments/get-by-name", b'{"experiment": {"name": "no id"}}'),
        ("model-versions/search", b'{"model_versions": {"not": "a list"}}'),
        ("runs/search", b'{"runs": [{"info": {"run_id": "r", "start_time": "soon"}}]}'),
        ("registered-models/search", b'{"registered_models": [{"aliases": []}]}'),
    ],
)
def test_an_answer_it_does_not_know_falls_back_to_mlflow(
    fleet: Fleet,
    proxy: Callable[..., Proxy],
    monkeypatch: pytest.MonkeyPatch,
    garble: str,
    answer: bytes,
) -> None:
    between = proxy(garble, answer)
    direct = experiment_runs_and_tags(fleet.uri, fleet.experiment)
    models = list_models(fleet.uri, fleet.prefix, "adapter")
    calls: list[str] = []
    real = registry_status.get_client
    monkeypatch.setattr(registry_status, "get_client", lambda uri: calls.append(uri) or real(uri))

    assert _plain(experiment_runs_and_tags(between.uri, fleet.experiment)) == _plain(direct)
    assert list_models(between.uri, fleet.prefix, "adapter") == models
    assert between.garbled >= 1  # the reader saw the odd answer ...
    mlflow_agents = [a for a, _, _ in between.seen if not a.startswith("Python-url")]
    assert mlflow_agents  # ... and MLflow's client answered instead
    assert calls == ([between.uri] if garble.startswith(("runs", "experiments")) else [])


def test_the_reader_sends_a_bearer_token_and_basic_login(
    fleet: Fleet, proxy: Callable[..., Proxy], monkeypatch: pytest.MonkeyPatch
) -> None:
    between = proxy()
    monkeypatch.delenv("MLFLOW_TRACKING_USERNAME", raising=False)
    monkeypatch.delenv("MLFLOW_TRACKING_PASSWORD", raising=False)
    monkeypatch.setenv("HOME", "/nonexistent")  # no ~/.mlflow/credentials
    monkeypatch.setenv("MLFLOW_TRACKING_TOKEN", "tok-123")
    assert experiment_runs(between.uri, fleet.experiment) is not None
    sent = {h.get("Authorization") for _, path, h in between.seen if "/api/2.0/" in path}
    assert sent == {"Bearer tok-123"}

    between.seen.clear()
    monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", "ann")
    monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", "pw:1")  # basic wins over the token
    assert list_models(between.uri, fleet.prefix, "fusion")
    sent = {h.get("Authorization") for _, _, h in between.seen}
    assert sent == {"Basic " + base64.b64encode(b"ann:pw:1").decode()}


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")
def test_https_with_the_servers_certificate_or_insecure_tls(
    fleet: Fleet, proxy: Callable[..., Proxy], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-keyout", str(key), "-out", str(cert), "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(cert, key)
    between = proxy(tls=tls)
    assert between.uri.startswith("https://")
    expected = _plain(experiment_runs_and_tags(fleet.uri, fleet.experiment))
    calls: list[str] = []
    real = registry_status.get_client
    monkeypatch.setattr(registry_status, "get_client", lambda uri: calls.append(uri) or real(uri))

    monkeypatch.setenv("MLFLOW_TRACKING_SERVER_CERT_PATH", str(cert))
    assert _plain(experiment_runs_and_tags(between.uri, fleet.experiment)) == expected
    monkeypatch.delenv("MLFLOW_TRACKING_SERVER_CERT_PATH")
    monkeypatch.setenv("MLFLOW_TRACKING_INSECURE_TLS", "true")
    assert _plain(experiment_runs_and_tags(between.uri, fleet.experiment)) == expected
    assert list_models(between.uri, fleet.prefix, "fusion")
    assert calls == []  # the REST reader answered, over TLS

    monkeypatch.delenv("MLFLOW_TRACKING_INSECURE_TLS")  # a certificate no CA vouches for
    with pytest.raises(Unreadable):  # left to MLflow's client, with its own TLS settings
        rest_read.experiment(rest_read.Server.from_uri(between.uri), fleet.experiment)
    with pytest.raises(RegistryError) as caught:  # which refuses it too: one line
        experiment_runs(between.uri, fleet.experiment)
    assert "\n" not in str(caught.value) and "CERTIFICATE_VERIFY_FAILED" in str(caught.value)


def test_no_answer_is_one_line_naming_the_uri(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    uri = f"http://user:secret@127.0.0.1:{port}"
    started = time.monotonic()
    for read in (lambda: experiment_runs(uri, "x"), lambda: list_models(uri, "p", "adapter")):
        with pytest.raises(RegistryError) as caught:
            read()
        message = str(caught.value)
        assert "\n" not in message and "secret" not in message
        assert f"tracking URI http://***@127.0.0.1:{port}: no answer" in message
        assert "start the server" in message
    assert time.monotonic() - started < 5


def test_settings_the_reader_leaves_to_mlflow(tmp_path: Path) -> None:
    uri = "https://mlflow.example:5000/base/"
    server = rest_read.Server.from_uri(uri, {})
    assert server.base == "https://mlflow.example:5000/base" and server.context is not None
    for env in (
        {"MLFLOW_TRACKING_AUTH": "kubernetes"},
        {"MLFLOW_TRACKING_AWS_SIGV4": "true"},
        {"MLFLOW_WORKSPACE": "team-a"},
        {"MLFLOW_TRACKING_INSECURE_TLS": "true", "MLFLOW_TRACKING_SERVER_CERT_PATH": "/x.pem"},
        {"MLFLOW_TRACKING_SERVER_CERT_PATH": str(tmp_path / "missing.pem")},
    ):
        with pytest.raises(Unreadable):
            rest_read.Server.from_uri(uri, env)
    insecure = rest_read.Server.from_uri(uri, {"MLFLOW_TRACKING_INSECURE_TLS": "true"})
    assert insecure.context is not None and not insecure.context.check_hostname
    assert rest_read.Server.from_uri(uri, {"MLFLOW_TRACKING_AWS_SIGV4": "false"}).context
    with_login = rest_read.Server.from_uri("http://ann:p%40ss@h:1", {"HOME": str(tmp_path)})
    assert with_login.base == "http://h:1" and with_login.user == "ann"
    assert with_login.headers["Authorization"] == "Basic " + base64.b64encode(b"ann:p@ss").decode()
    assert with_login.shown == "http://***@h:1"
