"""`adapterfleet export` and `adapterfleet import-adapter` as a user runs them: real processes,
exit codes, one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import torch
from safetensors.torch import load_file

from adapterfleet.adapters import ADAPTER_WEIGHTS

ROOT = Path(__file__).resolve().parents[2]


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "adapterfleet.cli.app", *map(str, args)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_export_then_import_round_trips_a_run_folder(ours, tmp_path):
    result = _run("export", ours / "run", "--format", "adapterhub", "--out", tmp_path / "ref")
    assert result.returncode == 0, result.stderr
    assert "| adapter | a" in result.stdout and "a, b" in result.stdout
    assert not list((tmp_path / "ref").glob("*.bin"))  # safetensors only, unless --torch-bin
    old_readers = tmp_path / "old"
    result = _run(
        "export", ours / "run", "--format", "adapterhub", "--out", old_readers, "--torch-bin"
    )
    assert result.returncode == 0, result.stderr
    assert (old_readers / "pytorch_adapter.bin").is_file()
    result = _run("import-adapter", tmp_path / "ref", "--out", tmp_path / "back", "--name", "rte")
    assert result.returncode == 0, result.stderr
    before = load_file(ours / "run" / "adapter" / ADAPTER_WEIGHTS)
    after = load_file(tmp_path / "back" / ADAPTER_WEIGHTS)
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert json.loads((tmp_path / "back" / "adapter_config.json").read_text())["name"] == "rte"


def test_refusals_and_unknown_formats_are_one_line_and_exit_2(exported, tmp_path):
    folder = tmp_path / "phm"
    folder.mkdir()
    meta = json.loads((exported / "adapter_config.json").read_text())
    meta["config"]["phm_layer"] = True
    (folder / "adapter_config.json").write_text(json.dumps(meta))
    (folder / "pytorch_adapter.bin").write_bytes((exported / "pytorch_adapter.bin").read_bytes())
    result = _run("import-adapter", folder, "--out", tmp_path / "out")
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "config.phm_layer=True" in errors[0]
    result = _run("export", exported, "--format", "peft", "--out", tmp_path / "x")
    assert result.returncode == 2 and "--format 'peft' is unknown" in result.stderr
