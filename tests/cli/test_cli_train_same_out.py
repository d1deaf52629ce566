"""Two `adapterfleet train` commands with one `--out` at once: the second is refused at once, in
one line, exit 2, naming the first one's pid. It said `starting afresh: the epochs kept in ...
are replaced`, deleted the first one's kept epochs while it trained, and both said `run folder:`
for a run.json that held only one of them. A killed first command leaves no lock that refuses."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from test_cli_train_resume import _config


def _command(config: Path, out: Path, *more: str) -> list[str]:
    command = [sys.executable, "-m", "adapterfleet.cli.app", "train", "-c", str(config)]
    return [*command, "--task", "fruit", "--out", str(out), *more]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": ":".join(sys.path)}


def test_a_second_train_with_the_same_out_is_refused_while_the_first_runs(
    tmp_path: Path, tiny_model: Path
) -> None:
    config, out = _config(tmp_path, tiny_model), tmp_path / "dup2"
    first = subprocess.Popen(
        _command(config, out), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=_env(), start_new_session=True,
    )  # fmt: skip
    try:
        while line := first.stderr.readline():
            if line.startswith("epoch 1/3"):
                os.kill(first.pid, signal.SIGSTOP)  # it holds --out, mid-run, for the test
                break
        assert (tmp_path / "dup2.partial" / "checkpoints" / "epoch-0001").is_dir()

        second = subprocess.run(
            _command(config, out, "--lr", "0.02"), capture_output=True, text=True, env=_env(),
            timeout=300,
        )  # fmt: skip
        assert second.returncode == 2, second.stderr
        assert second.stderr.splitlines() == [
            f"error: --out {out}: another adapterfleet train is writing this run folder (pid "
            f"{first.pid}); wait for it to end, or give another --out"
        ]
        assert (tmp_path / "dup2.partial" / "checkpoints" / "epoch-0001").is_dir()
        assert not out.exists()
    finally:
        os.killpg(first.pid, signal.SIGKILL)  # killed: the kernel lets go of its lock
        first.communicate()

    third = subprocess.run(
        _command(config, out, "--lr", "0.02"), capture_output=True, text=True, env=_env(),
        timeout=300,
    )  # fmt: skip
    assert third.returncode == 0, third.stderr
    assert "starting afresh" in third.stderr
    run = json.loads((out / "run.json").read_text())
    assert run["train_config"]["learning_rate"] == 0.02
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith((".dup2", "dup2"))) == [
        "dup2"
    ]
