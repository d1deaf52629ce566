"""`adapterfleet submit / logs / jobs` as a person runs them, against a real token-protected
Ray head on loopback: what they print, and what they leave out."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any  # conftest's RayHead

import pytest

from adapterfleet.orchestration.job_info import ended_line
from adapterfleet.orchestration.jobs import (
    JobError,
    job_info,
    submit_job,
    submit_pipeline,
    wait_for_job,
)

pytestmark = pytest.mark.integration
COMMAND = Path(sys.executable).with_name("adapterfleet")
# what `adapterfleet run` on the cluster says of the config below, before it starts anything
# (`submit` reads the config, not the base model: 7 is refused there, by the base's width)
REFUSED = (
    "adapters.reduction_factors: reduction_factor 7 does not divide the hidden size 384; choose "
    "a divisor of 384 such as 2, 16 or 64"
)
NOT_INSTALLED = "adapterfleet is not installed on the cluster's nodes"
RAY_INFO = re.compile(r"^\S+ \S+\s+INFO ", re.MULTILINE)  # "2026-11-30 18:03:01,770	INFO ..."

Done = subprocess.CompletedProcess[str]


def _cli(head: Any, *args: str, cwd: Path) -> Done:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_ADDRESS", "RAY_AUTH"))}
    env["RAY_AUTH_TOKEN"] = head.token
    return subprocess.run(
        [str(COMMAND), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=180
    )


@pytest.fixture(scope="module")
def refused_job(ray_head: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Done, str]:
    """`submit --wait` of a config the job refuses at once (it is validated on the cluster),
    and the job's id."""
    project = tmp_path_factory.mktemp("project")
    (project / "bad.yaml").write_text(
        f"name: bad\ndemo_tasks: true\nstorage: {project}/runs\n"
        "adapters: {reduction_factors: [7]}\n"
    )
    with open(project / "big.bin", "wb") as big:  # sparse: Ray warns by size, zips it small
        big.truncate(10 * 1024 * 1024)
    address = ray_head.address
    done = _cli(ray_head, "submit", "bad.yaml", "--wait", "--address", address, cwd=project)
    found = re.search(r"adapterfleet-bad-[0-9-]+-[0-9a-f]{4}", done.stdout + done.stderr)
    assert found, done.stdout + done.stderr
    return done, found[0]


def test_submit_and_follow_say_no_ray_info_lines(
    ray_head: Any, refused_job: tuple[Done, str], tmp_path: Path
) -> None:
    """Ray's job client logged `INFO dashboard_sdk.py ... Uploading package` on submit and
    `INFO sdk.py:520 -- WebSocket closed` at the end of `logs --follow`. Its warnings stay.
    Followed to its end, a FAILED job's `logs` exit 1 (it was 0: a CI script went on)."""
    submitted, job_id = refused_job
    assert not RAY_INFO.search(submitted.stderr), submitted.stderr
    assert "big.bin is very large" in submitted.stderr
    address = ray_head.address
    followed = _cli(ray_head, "logs", job_id, "--follow", "--address", address, cwd=tmp_path)
    assert followed.returncode == 1, followed.stderr
    assert REFUSED in followed.stdout
    assert not RAY_INFO.search(followed.stderr), followed.stderr
    assert followed.stderr.rstrip().splitlines()[-1] == f"job {job_id} ended FAILED"
    printed = _cli(ray_head, "logs", job_id, "--address", address, cwd=tmp_path)
    assert printed.returncode == 0 and REFUSED in printed.stdout  # its logs, printed: done


def test_submit_hints_at_status_with_the_jobs_own_overrides(ray_head: Any, tmp_path: Path) -> None:
    """The `progress:` hint was `adapterfleet status -c CONFIG`, without the `--set`s the job
    ran with: on a cluster `storage` and `tracking_uri` are given so, and the hint read another
    (empty) store. A login in them is masked."""
    (tmp_path / "bad.yaml").write_text("name: bad\ndemo_tasks: true\n")
    storage = tmp_path / "team runs"
    options = ["-o", f"storage={storage}", "-o", "tracking_uri=http://ann:pw@127.0.0.1:9/"]
    address = ray_head.address
    done = _cli(ray_head, "submit", "bad.yaml", "--address", address, *options, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert (
        f"  progress:  adapterfleet status -c bad.yaml -o 'storage={storage}' "
        "-o 'tracking_uri=http://***@127.0.0.1:9/'"
    ) in done.stdout.splitlines(), done.stdout
    assert "pw" not in done.stdout


def test_submit_wait_says_the_job_id_at_once_and_no_follow_hints(
    refused_job: tuple[Done, str],
) -> None:
    """`submit --wait` follows the job itself: the "follow it: adapterfleet logs ... --follow"
    and "progress:" hints were printed all the same, and the job's id only after the end."""
    submitted, job_id = refused_job
    assert submitted.stdout == (
        f"submitted {job_id}; waiting for it to end (Ctrl-C stops the waiting, not the job)\n"
    )


def test_submit_wait_says_the_jobs_own_error_line(
    ray_head: Any, refused_job: tuple[Done, str]
) -> None:
    """A job that failed with adapterfleet's `error: ...` line: `submit --wait` said only
    `ended FAILED; see its logs`, and the cause was a second command away."""
    submitted, job_id = refused_job
    assert submitted.returncode == 2
    errors = [line for line in submitted.stderr.splitlines() if line.startswith("error:")]
    logs = f"adapterfleet logs {job_id} --address {ray_head.address}"
    assert errors == [f"error: job {job_id} ended FAILED (its logs: {logs}); it said: {REFUSED}"]


def test_a_cluster_without_adapterfleet_is_said_to_lack_it(
    ray_head: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Ray head started without adapterfleet on its PATH (here: the job's PATH leaves out
    the virtualenv the head runs from): the job's log held only `/bin/sh: 1: adapterfleet: not
    found`, `jobs` said FAILED, and nothing said why."""
    monkeypatch.setenv("RAY_AUTH_TOKEN", ray_head.token)
    monkeypatch.delenv("RAY_AUTH_TOKEN_PATH", raising=False)
    (tmp_path / "c.yaml").write_text(f"name: bare\ndemo_tasks: true\nstorage: {tmp_path}/r\n")
    with pytest.raises(JobError) as info:
        submit_pipeline(
            tmp_path / "c.yaml",
            ray_head.address,
            working_dir=tmp_path,
            extra_env={"PATH": "/usr/bin:/bin"},
            wait=True,
        )
    said = re.fullmatch(
        rf"job (adapterfleet-bare-\S+) ended FAILED: {NOT_INSTALLED}.*", str(info.value)
    )
    assert said, str(info.value)
    job_id, address = said[1], ray_head.address
    logs = _cli(ray_head, "logs", job_id, "--address", address, cwd=tmp_path)
    assert "adapterfleet: not found" in logs.stdout
    assert logs.stderr.startswith(f"job {job_id} failed: {NOT_INSTALLED}"), logs.stderr
    listed = _cli(ray_head, "jobs", "--address", address, cwd=tmp_path)
    assert re.search(rf"\| {job_id} +\| FAILED", listed.stdout), listed.stdout
    assert listed.stderr.startswith(f"1 job failed ({job_id}): {NOT_INSTALLED}"), listed.stderr


def test_a_killed_pipeline_job_says_how_to_go_on(ray_head: Any, tmp_path: Path) -> None:
    """A pipeline's driver killed on the cluster (SIGKILL, a node lost): `logs` and
    `submit --wait` said `ended FAILED; see its logs`, and its logs ended mid-line, with
    nothing saying that submitting it again goes on where it was."""
    bin_ = tmp_path / "bin"  # an `adapterfleet` that starts, then is killed
    bin_.mkdir()
    (bin_ / "adapterfleet").write_text('#!/bin/sh\necho "pipeline k: validating"\nkill -9 $$\n')
    (bin_ / "adapterfleet").chmod(0o755)
    entrypoint = "adapterfleet run k.yaml --set adapters.training.max_epochs=1"
    env = {"PATH": f"{bin_}:/usr/bin:/bin", "RAY_AUTH_TOKEN": ray_head.token}
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RAY_AUTH_TOKEN", ray_head.token)
        job_id = submit_job(ray_head.address, entrypoint, env=env)
        assert wait_for_job(ray_head.address, job_id, timeout_s=90, poll_s=0.5) == "FAILED"
        info = job_info(ray_head.address, job_id)
    again = (
        f"adapterfleet submit k.yaml --set adapters.training.max_epochs=1 "
        f"--address {ray_head.address}"
    )
    said = ended_line(info, ray_head.address)
    assert said.startswith(f"job {job_id} ended FAILED with no error of its own"), said
    assert f"goes on from what it registered and its trials' checkpoints: {again}" in said
    logs = _cli(ray_head, "logs", job_id, "--address", ray_head.address, cwd=tmp_path)
    assert "pipeline k: validating" in logs.stdout
    assert logs.stderr.startswith(f"job {job_id} ended FAILED with no error"), logs.stderr
    assert logs.stderr.rstrip().endswith(again), logs.stderr
    assert ended_line(replace(info, entrypoint="sh -c 'exit 9'"), None).endswith(
        f"see its logs: adapterfleet logs {job_id}"
    )  # not a pipeline's job: nothing to submit again


def test_jobs_lists_submitted_jobs_not_drivers_that_joined(ray_head: Any, tmp_path: Path) -> None:
    """A team's `jobs` listed interactive `run --address` drivers beside the submitted jobs,
    one that exited 2 at validation as SUCCEEDED (Ray's word for a driver that disconnected)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_ADDRESS", "RAY_AUTH"))}
    env.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=ray_head.token)
    joined = f"import ray; ray.init(address={ray_head.gcs!r}); ray.shutdown()"
    done = subprocess.run(
        [sys.executable, "-c", joined], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    listed = _cli(ray_head, "jobs", "--address", ray_head.address, cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert "ray.init(" not in listed.stdout, listed.stdout
    said = re.search(r"\((\d+) drivers? that joined the cluster themselves", listed.stderr)
    assert said and int(said[1]) >= 1, listed.stderr


def test_ctrl_c_on_logs_follow_is_one_line_and_exit_130(ray_head: Any, tmp_path: Path) -> None:
    """Ctrl-C is how a user leaves `logs --follow`: it printed ~50 lines (`RuntimeError:
    aclose(): asynchronous generator is already running`, `async generator ignored
    GeneratorExit`), exit 1."""
    import signal

    from adapterfleet.orchestration.jobs import stop_job, submit_job

    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_ADDRESS", "RAY_AUTH"))}
    env["RAY_AUTH_TOKEN"] = ray_head.token
    os.environ["RAY_AUTH_TOKEN"] = ray_head.token
    try:
        code = "import time; print('follow-me', flush=True); time.sleep(300)"
        job_id = submit_job(ray_head.address, f"{sys.executable} -c {code!r}")
        command = [str(COMMAND), "logs", job_id, "--follow", "--address", ray_head.address]
        follow = subprocess.Popen(
            command,
            cwd=tmp_path,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert follow.stdout is not None
        for line in follow.stdout:  # the job's line has come: the follow waits on the next
            if "follow-me" in line:
                break
        follow.send_signal(signal.SIGINT)
        _, stderr = follow.communicate(timeout=60)
        stop_job(ray_head.address, job_id)
    finally:
        os.environ.pop("RAY_AUTH_TOKEN", None)
    assert follow.returncode == 130, stderr
    assert "Traceback" not in stderr and "RuntimeError" not in stderr, stderr
    assert stderr.strip().splitlines()[-1] == "interrupted", stderr
