"""Jobs API pieces that need no cluster: addresses, tokens, entrypoints, env, fast failures."""

from __future__ import annotations

import functools
import getpass
import http.server
import re
import socket
import threading
import time
from pathlib import Path

import pytest
from cluster_support import registry_conftest

from adapterfleet.config import ConfigError
from adapterfleet.orchestration.job_env import logins_out
from adapterfleet.orchestration.job_errors import unreachable
from adapterfleet.orchestration.job_upload import storage_excludes
from adapterfleet.orchestration.jobs import (
    PASS_ENV,
    JobError,
    job_env,
    list_jobs,
    load_token,
    make_submission_id,
    normalize_address,
    pipeline_entrypoint,
    submit_pipeline,
)


@pytest.fixture
def no_token(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No token anywhere: RAY_AUTH_* unset and HOME without ~/.ray/auth_token."""
    for name in ("RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH", "RAY_ADDRESS", "RAY_API_SERVER_ADDRESS"):
        monkeypatch.delenv(name, raising=False)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    return home


def test_refused_address_fails_fast_with_one_line(no_token: Path) -> None:
    address = f"http://127.0.0.1:{registry_conftest.free_port()}"
    started = time.monotonic()
    with pytest.raises(JobError) as info:
        list_jobs(address)
    assert time.monotonic() - started < 5
    message = str(info.value)
    assert "\n" not in message and address in message and "connection refused" in message
    port = address.rsplit(":", 1)[1]  # not the default's: it was told to pass 8265's
    assert (
        f"that its dashboard listens on port {port} (ray start --head --dashboard-port" in message
    )
    assert "127.0.0.1:8265" not in message
    default = unreachable("http://127.0.0.1:8265", "connection refused")  # the usual port's
    assert "ray dashboard cluster.yaml" in str(default)


def test_a_refused_host_port_without_http_may_be_the_gcs_address(no_token: Path) -> None:
    """`--address HOST:PORT`, as a GCS address is written (`ray start --address`): the
    message says where jobs go instead; `host:8265` and an http:// URL are dashboard-like."""
    port = registry_conftest.free_port()
    with pytest.raises(JobError) as info:
        list_jobs(f"127.0.0.1:{port}")
    message = str(info.value)
    assert f"if 127.0.0.1:{port} is the cluster's GCS address" in message
    assert "pass the dashboard's instead: http://127.0.0.1:8265 by default" in message
    for dashboard_like in (f"http://127.0.0.1:{port}", "127.0.0.1:8265"):
        with pytest.raises(JobError) as info:
            list_jobs(dashboard_like)
        assert "GCS" not in str(info.value)


def test_an_http_server_that_is_not_rays_is_said_in_one_line(
    no_token: Path, tmp_path: Path
) -> None:
    """Another HTTP server's port (an MLflow server's, say) answers 404 to the job client's
    version check, which was a traceback."""
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(tmp_path))
    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler) as server:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        given = f"127.0.0.1:{server.server_address[1]}"
        try:
            with pytest.raises(JobError) as info:
                list_jobs(given)
        finally:
            server.shutdown()
    message = str(info.value)
    assert message.startswith(f"Ray address {given} answers, but it is not the Ray job server")
    assert "\n" not in message and "http://127.0.0.1:8265" in message


def test_silent_address_times_out_within_seconds(no_token: Path) -> None:
    """A port that accepts connections but never answers: the probe's read timeout ends it."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        address = f"http://127.0.0.1:{server.getsockname()[1]}"
        started = time.monotonic()
        with pytest.raises(JobError, match=re.escape(address)):
            list_jobs(address)
        assert time.monotonic() - started < 10


def test_addresses(monkeypatch: pytest.MonkeyPatch, no_token: Path) -> None:
    assert normalize_address("head:8265/") == "http://head:8265"
    assert normalize_address("https://h:1") == "https://h:1"
    with pytest.raises(JobError, match="not an http"):
        normalize_address("ray://head:10001")
    with pytest.raises(JobError, match="--address"):
        normalize_address(None)
    monkeypatch.setenv("RAY_ADDRESS", "http://from-env:8265")
    assert normalize_address(None) == "http://from-env:8265"


def test_token_sources_in_rays_order(no_token: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert load_token() is None
    (no_token / ".ray").mkdir()
    (no_token / ".ray" / "auth_token").write_text("from-home\n")
    assert load_token() == ("from-home", "~/.ray/auth_token")
    path = no_token / "tok"
    path.write_text("  from-path \n")
    monkeypatch.setenv("RAY_AUTH_TOKEN_PATH", str(path))
    assert load_token() == ("from-path", "RAY_AUTH_TOKEN_PATH")
    monkeypatch.setenv("RAY_AUTH_TOKEN", "from-env")
    assert load_token() == ("from-env", "RAY_AUTH_TOKEN")
    monkeypatch.delenv("RAY_AUTH_TOKEN")
    monkeypatch.setenv("RAY_AUTH_TOKEN_PATH", str(no_token / "missing"))
    with pytest.raises(JobError, match="RAY_AUTH_TOKEN_PATH=.*missing cannot be read"):
        load_token()


def test_entrypoint_env_and_submission_id(monkeypatch: pytest.MonkeyPatch) -> None:
    assert pipeline_entrypoint("configs/a b.yaml", ["x.y=1", "n=it's"]) == (
        "adapterfleet run 'configs/a b.yaml' --set x.y=1 --set 'n=it'\"'\"'s'"
    )
    for name in PASS_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://mlflow:5000")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("UNRELATED_SECRET", "x")
    monkeypatch.setenv("ADAPTERFLEET_USER", "ada")  # who submits: its runs' creator
    env = job_env({"EXTRA": "2"})
    assert env == {
        "MLFLOW_TRACKING_URI": "http://mlflow:5000",
        "HF_HUB_OFFLINE": "1",
        "ADAPTERFLEET_USER": "ada",
        "RAY_JOB_STOP_WAIT_TIME_S": "30",  # the driver's time to end its runs on `stop`
        "EXTRA": "2",
    }
    monkeypatch.setenv("RAY_JOB_STOP_WAIT_TIME_S", "120")  # the shell's own is passed instead
    assert job_env()["RAY_JOB_STOP_WAIT_TIME_S"] == "120"
    monkeypatch.delenv("ADAPTERFLEET_USER")
    assert job_env()["ADAPTERFLEET_USER"] == getpass.getuser()  # the submitting login
    with pytest.raises(ValueError, match="RAY_AUTH_TOKEN must not be passed"):
        job_env({"RAY_AUTH_TOKEN": "t"})
    sid = make_submission_id("glue")
    assert re.fullmatch(r"adapterfleet-glue-\d{8}-\d{6}-[0-9a-f]{4}", sid)
    assert make_submission_id("glue") != sid


def test_a_login_in_a_tracking_uri_goes_to_the_jobs_env_not_its_entrypoint(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name in PASS_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://u:s3cret@mlflow:5000")
    env = job_env()
    overrides = logins_out(["tracking_uri=http://u:s3cret@other:5000", "x.y=1"], env)
    entrypoint = pipeline_entrypoint("c.yaml", overrides)
    assert entrypoint == "adapterfleet run c.yaml --set tracking_uri=http://other:5000 --set x.y=1"
    assert env == {
        "MLFLOW_TRACKING_URI": "http://mlflow:5000",
        "MLFLOW_TRACKING_USERNAME": "u",
        "MLFLOW_TRACKING_PASSWORD": "s3cret",
        "ADAPTERFLEET_USER": env["ADAPTERFLEET_USER"],
        "RAY_JOB_STOP_WAIT_TIME_S": "30",
    }
    with pytest.raises(ConfigError, match="MLFLOW_TRACKING_PASSWORD contradicts") as caught:
        logins_out(["tracking_uri=http://u:other@other:5000"], env)
    assert "other@" not in str(caught.value)


def test_config_outside_working_dir_is_refused(tmp_path: Path, no_token: Path) -> None:
    project, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    project.mkdir()
    elsewhere.mkdir()
    (elsewhere / "c.yaml").write_text("name: x\n")
    with pytest.raises(JobError, match="outside working_dir"):
        submit_pipeline(elsewhere / "c.yaml", "http://127.0.0.1:1", working_dir=project)


def test_a_relative_storage_or_sqlite_store_is_refused_before_any_upload(
    tmp_path: Path, no_token: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`storage: jobruns` put the job's runs, checkpoints and MLflow store in Ray's temporary
    copy of the working dir: `status` here found no runs, and the next submission (a new
    package) trained every task again. It is refused here, before Ray is reached."""
    monkeypatch.chdir(tmp_path)
    address = "http://127.0.0.1:1"  # nothing answers: the refusal comes first
    cases = {
        "storage: jobruns\n": "storage: 'jobruns' is relative: the job would write it inside",
        "": "storage: 'adapterfleet-runs' is relative: ",  # the default
        f"storage: {tmp_path}/r\ntracking_uri: sqlite:///r/mlflow.db\n": (
            "tracking_uri: 'sqlite:///r/mlflow.db' is a relative SQLite path: the job would"
        ),
    }
    for number, (lines, words) in enumerate(cases.items()):
        (tmp_path / f"c{number}.yaml").write_text(f"name: x\ndemo_tasks: true\n{lines}")
        with pytest.raises(ConfigError) as caught:
            submit_pipeline(f"c{number}.yaml", address, working_dir=tmp_path)
        assert str(caught.value).startswith(words), caught.value
        assert "absolute" in str(caught.value)
    with pytest.raises(ConfigError, match="^storage: 'runs' is relative"):  # --set counts too
        submit_pipeline("c1.yaml", address, ["storage=runs"], working_dir=tmp_path)
    with pytest.raises(JobError, match="127.0.0.1:1"):  # absolute: on to the cluster
        submit_pipeline("c1.yaml", address, [f"storage={tmp_path}/r"], working_dir=tmp_path)


def test_storage_inside_the_working_dir_is_excluded_however_it_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Absolute, relative, with `..`, through a link: the same folder inside the upload is
    left out (only a relative path without `..` was). Outside it, or the folder itself:
    nothing. A relative storage counts from the working dir (where the job runs) and from the
    current folder (where a local run put it)."""
    project = tmp_path / "userA"
    (project / "sub").mkdir(parents=True)
    (tmp_path / "link").symlink_to(project)
    monkeypatch.chdir(project)
    for written in (project / "runs", "runs", "./runs/", "../userA/runs", tmp_path / "link/runs"):
        assert storage_excludes(str(written), project) == ["/runs/"], written
    assert storage_excludes(None, project) == ["/adapterfleet-runs/"]
    assert storage_excludes("out/r[1]*", project) == ["/out/r\\[1\\]\\*/"]
    for outside in (tmp_path / "elsewhere", "..", ".", str(project), "/tmp"):
        assert storage_excludes(str(outside), project) == [], outside
    monkeypatch.chdir(project / "sub")  # `submit --working-dir ..` from a subfolder
    assert storage_excludes("runs", project) == ["/runs/", "/sub/runs/"]


def test_submit_reads_the_config_with_its_budget_and_refuses_it_as_run_would(
    tmp_path: Path, no_token: Path
) -> None:
    """`submit` read the YAML without the budget: a budget's relative storage was sent (the job
    wrote its store in Ray's temporary folder), a budget's absolute one refused as relative, a
    budget not declared or a reduction factor of 0 sent to fail on the cluster after
    `submitted`."""
    address = "http://127.0.0.1:1"  # nothing answers: a refusal comes first
    (tmp_path / "c.yaml").write_text(
        f"name: x\ndemo_tasks: true\nstorage: {tmp_path}/r\n"
        f"budgets:\n  rel: {{storage: relruns}}\n  abs: {{storage: {tmp_path}/b}}\n"
    )
    cases = {
        "budget=rel": "storage: 'relruns' is relative: the job would write it inside",
        "budget=nosuch": "budget: 'nosuch' is not declared in budgets; declared: rel, abs",
        "adapters.reduction_factors=[0]": "adapters.reduction_factors: expected an integer",
    }
    for override, words in cases.items():
        with pytest.raises(ConfigError) as caught:
            submit_pipeline(tmp_path / "c.yaml", address, [override], working_dir=tmp_path)
        assert str(caught.value).startswith(words), caught.value
    (tmp_path / "rel.yaml").write_text(
        f"name: x\ndemo_tasks: true\nbudgets:\n  abs: {{storage: {tmp_path}/b}}\n"
    )  # relative but for the budget: on to the cluster
    with pytest.raises(JobError, match="127.0.0.1:1"):
        submit_pipeline(tmp_path / "rel.yaml", address, ["budget=abs"], working_dir=tmp_path)
