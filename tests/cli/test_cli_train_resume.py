"""Ctrl-C during `adapterfleet train` as a user sends it: the finished epochs stay beside --out
(`<out>.partial`), one line says so, and the same command continues after the newest of them.
It said `interrupted` only, and every finished epoch was lost."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import yaml
from tuning_support import write_tasks


def _config(root: Path, model: Path) -> Path:
    """The fruit task (16 training rows) on the tiny random BERT, 3 epochs on the CPU."""
    tasks = write_tasks(root / "data", train=16, dev=8)
    training = {"max_epochs": 3, "batch_size": 8, "learning_rate": 0.01, "device": "cpu"}
    document = {
        "name": "resume",
        "base_model": str(model),
        "max_length": 24,
        "storage": str(root / "runs"),
        "data_root": str(root / "data"),
        "tasks": tasks,
        "adapters": {"tasks": ["fruit"], "reduction_factors": [4], "training": training},
    }
    path = root / "mine.yaml"
    path.write_text(yaml.safe_dump(document))
    return path


def _train(config: Path, out: Path, *, stop_after: str | None = None) -> tuple[int, list[str]]:
    """`train` in a subprocess, Ctrl-C (SIGINT) right after it prints the line starting with
    `stop_after`: its exit status and its stderr lines."""
    command = [sys.executable, "-m", "adapterfleet.cli.app", "train", "-c", str(config)]
    command += ["--task", "fruit", "--out", str(out)]
    env = {**os.environ, "PYTHONPATH": ":".join(sys.path)}
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        start_new_session=True,  # the signal reaches this command only, not pytest
    ) as train:  # fmt: skip
        lines = []
        try:
            while stop_after is not None and (line := train.stderr.readline()):
                lines.append(line.rstrip("\n"))
                if line.startswith(stop_after):
                    os.kill(train.pid, signal.SIGINT)
                    break
            _, rest = train.communicate(timeout=300)
        finally:
            if train.poll() is None:
                os.killpg(train.pid, signal.SIGKILL)
    return train.returncode, lines + rest.splitlines()


def test_ctrl_c_keeps_the_finished_epochs_and_the_same_command_continues(
    tmp_path: Path, tiny_model: Path
) -> None:
    config, out = _config(tmp_path, tiny_model), tmp_path / "run"
    partial = tmp_path / "run.partial"

    code, said = _train(config, out, stop_after="epoch 1/3")
    assert code == 130, said
    assert said[-1] == (
        f"interrupted: finished epoch 1 of 3 kept in {partial}; run the same command again "
        "to continue"
    ), said
    assert not out.exists()
    assert sorted(p.name for p in (partial / "checkpoints").iterdir()) == ["epoch-0001"]

    code, said = _train(config, out)
    assert code == 0, said
    assert f"resuming from epoch 2 of 3 (checkpoint in {partial})" in said
    epochs = [line.split(":")[0] for line in said if line.startswith("epoch ")]
    assert epochs == ["epoch 2/3", "epoch 3/3"], said
    run = json.loads((out / "run.json").read_text())
    assert [entry["epoch"] for entry in run["fit"]["history"]] == [1, 2, 3]
    assert sorted(p.name for p in out.iterdir()) == ["adapter", "head", "run.json"]
    assert not partial.exists()
