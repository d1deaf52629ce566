"""Jobs API against a real token-protected Ray head on loopback."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any  # conftest's RayHead

import pytest

from adapterfleet.orchestration.jobs import (
    JobError,
    connect,
    job_logs,
    job_status,
    list_jobs,
    stop_job,
    submit_job,
    submit_pipeline,
    wait_for_job,
)
from adapterfleet.registry.heartbeat import ADDRESS_KEY

pytestmark = pytest.mark.integration
MARKER = "adapterfleet-job-marker-7f3a"


@pytest.fixture
def with_token(ray_head: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("RAY_AUTH_TOKEN", ray_head.token)
    monkeypatch.delenv("RAY_AUTH_TOKEN_PATH", raising=False)
    return ray_head


def test_submit_logs_and_no_token_leak(with_token: Any, tmp_path: Path) -> None:
    (tmp_path / "data.txt").write_text("shipped with the working dir\n")
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "mlflow.db").write_bytes(b"local only")
    code = (
        "import os, pathlib; "
        "from adapterfleet.registry.heartbeat import submitted_job_address, submitted_job_id; "
        f"print('{MARKER}', os.environ['AF_PROBE'], pathlib.Path('data.txt').read_text().strip(), "
        "'runs:', pathlib.Path('runs').exists(), 'job:', submitted_job_id(), "
        "'at:', submitted_job_address())"
    )
    job_id = submit_job(
        with_token.address,
        f"{sys.executable} -c {code!r}",
        working_dir=tmp_path,
        env={"AF_PROBE": "probe-value-42"},
        excludes=["/runs/"],
        submission_id=f"adapterfleet-test-{int(time.time())}",
        metadata={ADDRESS_KEY: with_token.address},  # as submit records it
    )
    assert job_id.startswith("adapterfleet-test-")
    assert wait_for_job(with_token.address, job_id, timeout_s=90, poll_s=0.5) == "SUCCEEDED"
    logs = job_logs(with_token.address, job_id)
    assert isinstance(logs, str)
    said = f"{MARKER} probe-value-42 shipped with the working dir runs: False job: {job_id}"
    assert f"{said} at: {with_token.address}" in logs  # a second driver's refusal names both
    assert with_token.token not in logs
    followed = "".join(job_logs(with_token.address, job_id, follow=True))
    assert MARKER in followed
    listed = {job.job_id: job for job in list_jobs(with_token.address)}
    assert listed[job_id].status == "SUCCEEDED"


def test_stop_long_running_job(with_token: Any) -> None:
    job_id = submit_job(with_token.address, f"{sys.executable} -c 'import time; time.sleep(300)'")
    deadline = time.monotonic() + 60
    while job_status(with_token.address, job_id) == "PENDING" and time.monotonic() < deadline:
        time.sleep(0.5)
    assert stop_job(with_token.address, job_id) is True
    assert wait_for_job(with_token.address, job_id, timeout_s=60, poll_s=0.5) == "STOPPED"
    assert stop_job(with_token.address, job_id) is False


def test_submit_pipeline_entrypoint(with_token: Any, tmp_path: Path) -> None:
    config = tmp_path / "configs" / "tiny.yaml"
    config.parent.mkdir()
    config.write_text(f"name: tiny\ndemo_tasks: true\nstorage: {tmp_path}/runs\n")
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "big.bin").write_bytes(os.urandom(1024))
    job_id = submit_pipeline(
        config,
        with_token.address,
        overrides=["adapters.training.max_epochs=1"],
        working_dir=tmp_path,
        extra_env={"AF_EXTRA": "1"},
    )
    assert job_id.startswith("adapterfleet-tiny-")
    stop_job(with_token.address, job_id)
    metadata = connect(with_token.address).get_job_info(job_id).metadata
    assert metadata[ADDRESS_KEY] == with_token.address  # its driver names it in `stop`'s hint
    info = next(j for j in list_jobs(with_token.address) if j.job_id == job_id)
    expected = "adapterfleet run configs/tiny.yaml --set adapters.training.max_epochs=1"
    assert info.entrypoint == expected
    assert wait_for_job(with_token.address, job_id, timeout_s=60, poll_s=0.5) in (
        "STOPPED",
        "FAILED",
        "SUCCEEDED",
    )


def test_the_packaged_demo_is_submitted_by_its_name(
    with_token: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`submit -c demo` from a folder of one's own: the config ships with adapterfleet, so it
    is not refused as outside the upload; the job names it as the user did."""
    monkeypatch.chdir(tmp_path)
    overrides = ["budget=tiny", f"storage={tmp_path}/runs"]
    job_id = submit_pipeline("demo", with_token.address, overrides, working_dir=tmp_path)
    assert job_id.startswith("adapterfleet-demo-")
    stop_job(with_token.address, job_id)
    info = next(j for j in list_jobs(with_token.address) if j.job_id == job_id)
    assert info.entrypoint == f"adapterfleet run demo --set {overrides[0]} --set {overrides[1]}"
    assert wait_for_job(with_token.address, job_id, timeout_s=60, poll_s=0.5) in (
        "STOPPED",
        "FAILED",
        "SUCCEEDED",
    )


def test_wrong_token_is_refused(with_token: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAY_AUTH_TOKEN", "0" * 64)
    with pytest.raises(JobError, match=r"rejected the auth token from RAY_AUTH_TOKEN") as info:
        list_jobs(with_token.address)
    assert "0" * 64 not in str(info.value)


def test_client_without_token_gets_one_line_error(ray_head: Any, tmp_path: Path) -> None:
    """A fresh process with no token anywhere (own HOME, no RAY_AUTH_* vars)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env["HOME"] = str(tmp_path)
    code = (
        "from adapterfleet.orchestration.jobs import JobError, list_jobs\n"
        "try:\n"
        f"    list_jobs({ray_head.address!r})\n"
        "except JobError as e:\n"
        "    print('ERROR:', e)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("ERROR:")]
    assert len(lines) == 1, done.stdout + done.stderr
    assert ray_head.address in lines[0]
    for name in ("RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH", "~/.ray/auth_token"):
        assert name in lines[0]
    assert ray_head.token not in done.stdout + done.stderr


def test_a_driver_joined_by_address_may_name_it_again_and_no_other(with_token: Any) -> None:
    """`run --address HOST:PORT` joins, and the adapter stage asks for the same address again:
    taken, though the cluster calls itself by its node's IP, not 127.0.0.1; another cluster's
    address is refused in one line (a process already in Ray used to ignore it)."""
    from cluster_support import gcs_port

    port = gcs_port(with_token)
    given = f"127.0.0.1:{port}"
    code = (
        "from adapterfleet.config import ConfigError\n"
        "from adapterfleet.orchestration.sweep import ensure_ray\n"
        "import ray\n"
        f"ensure_ray({given!r}, None)\n"
        f"ensure_ray({given!r}, None)\n"
        "print('GCS', ray.get_runtime_context().gcs_address)\n"
        "try:\n"
        "    ensure_ray('127.0.0.1:1', None)\n"
        "except ConfigError as error:\n"
        "    print('REFUSED', error)\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_ADDRESS")}
    env.update(RAY_AUTH_MODE="token", RAY_USAGE_STATS_ENABLED="0")  # a driver of this cluster
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.splitlines()
    gcs = next(line.split()[1] for line in lines if line.startswith("GCS "))
    assert gcs != given and gcs.endswith(f":{port}")  # the same cluster, named twice
    assert [line for line in lines if line.startswith("REFUSED ")] == [
        f"REFUSED ray address '127.0.0.1:1': this process is already in Ray ({gcs}); leave the "
        "address out to run there, or call ray.shutdown() first"
    ], done.stdout


@pytest.mark.parametrize(
    ("auth", "fix"),
    [
        ({}, "set RAY_AUTH_MODE=token here, with its token in ~/.ray/auth_token or RAY_AUTH_TOKEN"),
        (
            {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": "not-the-clusters-token"},
            "put the cluster's token in RAY_AUTH_TOKEN or ~/.ray/auth_token",
        ),
    ],
    ids=["no-token-mode", "another-token"],
)
def test_a_driver_without_the_clusters_token_is_refused_in_one_line(
    ray_head: Any, tmp_path: Path, auth: dict[str, str], fix: str
) -> None:
    """`run --address` to a cluster with token authentication, with no token or another one:
    the one line that says so came after Ray's own retries, 20 `gcs_client.cc ...
    InvalidAuthToken` lines over 20 s. The GCS is asked first, as `ray.init` would."""
    config = tmp_path / "pipe.yaml"
    config.write_text(f"name: tok\ndemo_tasks: true\nstorage: {tmp_path}/runs\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_ADDRESS", "RAY_AUTH"))}
    env.update(auth, RAY_USAGE_STATS_ENABLED="0", HF_HUB_OFFLINE="1")
    cli = str(Path(sys.executable).with_name("adapterfleet"))
    command = [cli, "run", "-c", str(config), "--address", ray_head.gcs]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    said = done.stdout + done.stderr
    assert done.returncode != 0, said
    assert "gcs_client" not in said and "Authentication token is missing" not in said, said
    assert [line for line in said.splitlines() if line.startswith("error:")] == [
        f"error: ray address '{ray_head.gcs}': the cluster uses token authentication and "
        f"refused this driver (InvalidAuthToken); {fix}"
    ], said


def test_an_unknown_job_points_to_the_jobs_command(
    with_token: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`logs` / `stop` / `status` of a job the cluster does not know: the CLI command that
    lists the jobs (it named `list_jobs`, a Python function), with --address when given."""
    address = with_token.address
    listing = f"adapterfleet jobs --address {address}"
    for call in (job_logs, stop_job, job_status):
        with pytest.raises(JobError) as info:
            call(address, "nosuchjob")
        message = str(info.value)
        assert message.endswith(f"nosuchjob at {address}: not found; list the jobs: {listing}")
    monkeypatch.setenv("RAY_ADDRESS", address)  # no flag: the variable names it again
    with pytest.raises(JobError, match=r"not found; list the jobs: adapterfleet jobs$"):
        job_logs(None, "nosuchjob")


def test_the_gcs_address_points_to_the_dashboards(with_token: Any) -> None:
    """The cluster's GCS address (what `ray start --address` takes) answers, but not HTTP: it
    was said as unreachable ("start the cluster") though the cluster was up."""
    from cluster_support import gcs_port

    given = f"127.0.0.1:{gcs_port(with_token)}"
    with pytest.raises(JobError) as info:
        list_jobs(given)
    message = str(info.value)
    assert message.startswith(f"Ray address {given} answers, but it is not the Ray job server")
    assert "pass the dashboard's address: http://127.0.0.1:8265 by default" in message
    assert "\n" not in message


def _shipped_folder(head: Any, job_id: str) -> Path:
    """The working dir the head unpacked for the job (its runtime_env's package)."""

    uri = connect(head.address).get_job_info(job_id).runtime_env["working_dir"]
    name = uri.removeprefix("gcs://").removesuffix(".zip")
    folder = head.temp_dir / "session_latest" / "runtime_resources" / "working_dir_files" / name
    assert folder.is_dir(), uri
    return folder


@pytest.mark.parametrize("written", ["absolute", "with .."])
def test_storage_inside_the_working_dir_is_not_uploaded(
    with_token: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, written: str
) -> None:
    """`storage: /abs/userA/runs` submitted from userA/ uploaded runs/ (35 MB after one tiny
    run): only a relative path without `..` was left out."""
    project = tmp_path / "userA"
    (project / "runs").mkdir(parents=True)
    (project / "runs" / "adapter.safetensors").write_bytes(os.urandom(1024))
    storage = project / "runs" if written == "absolute" else f"{project}/../userA/runs"
    config = project / "team.yaml"  # refused on the cluster at once (7 does not divide the
    # base's width: submit reads the config, not the base): the job ends quickly
    config.write_text(
        f"name: team\ndemo_tasks: true\nstorage: {storage}\nadapters: {{reduction_factors: [7]}}\n"
    )
    monkeypatch.chdir(project)
    job_id = submit_pipeline(config, with_token.address, working_dir=project)
    wait_for_job(with_token.address, job_id, timeout_s=90, poll_s=0.5)
    shipped = _shipped_folder(with_token, job_id)
    assert (shipped / "team.yaml").is_file()
    assert not (shipped / "runs").exists()


def test_a_second_submit_of_a_running_pipeline_is_refused_here(
    with_token: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A second `submit` of a pipeline whose job still ran said `submitted` and exited 0; its
    job then failed on the cluster, refused by the first's driver. Now `submit` refuses it,
    naming the running job; the same pipeline on another store is not refused."""
    from ray.job_submission import JobSubmissionClient

    from adapterfleet.orchestration.job_info import PIPELINE_KEY, STORE_KEY, running_twin

    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)  # the store: storage alone
    config = tmp_path / "twin.yaml"
    config.write_text(f"name: twin\ndemo_tasks: true\nstorage: {tmp_path}/runs\n")
    metadata = {PIPELINE_KEY: "twin", STORE_KEY: f"{tmp_path}/runs"}  # as submit records them
    sleeper = f"{sys.executable} -c 'import time; time.sleep(300)'"
    first = submit_job(with_token.address, sleeper, metadata=metadata)
    try:
        with pytest.raises(JobError) as caught:
            submit_pipeline(config, with_token.address, working_dir=tmp_path)
        assert str(caught.value).startswith(
            f"pipeline twin: job {first} is "  # pending or running
        )
        assert f"adapterfleet stop {first} --address {with_token.address}" in str(caught.value)
        client: JobSubmissionClient = connect(with_token.address)
        assert running_twin(client.list_jobs(), "twin", f"{tmp_path}/elsewhere") is None
    finally:
        stop_job(with_token.address, first)
    assert wait_for_job(with_token.address, first, timeout_s=60, poll_s=0.5) == "STOPPED"
