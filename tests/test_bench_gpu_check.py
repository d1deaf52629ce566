"""`make gpu-check` (benchmarks/gpu_check.py): what runs without a GPU. On this machine it says
why nothing ran; its packing benchmark runs on CPU workers of the local Ray with a tiny shape."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from benchmarks.gpu_check import packing_throughput, train_steps

ROOT = Path(__file__).resolve().parents[1]
TINY = {
    "hidden_size": 32,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "intermediate_size": 64,
}


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU: the check runs")
def test_without_a_gpu_it_says_why_nothing_ran_and_exits_0(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "benchmarks.gpu_check", "--out", str(tmp_path / "out")],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "gpu-check: skipped, nothing ran: torch " in result.stdout
    assert "sees no CUDA device; run it on a CUDA machine" in result.stdout
    assert not (tmp_path / "out").exists()


def test_train_steps_times_adapter_training_steps():
    run = train_steps(TINY, steps=2, batch=4, seq=8, device="cpu")
    assert run["examples"] == 8.0 and run["end"] > run["start"]


@pytest.mark.integration
def test_packing_runs_trials_side_by_side_and_sums_their_examples(ray_local):
    one = packing_throughput(TINY, 1, steps=2, batch=4, seq=8, gpu=False)
    two = packing_throughput(TINY, 2, steps=2, batch=4, seq=8, gpu=False)
    assert (one["trials"], two["trials"]) == (1, 2)
    assert one["examples_per_s"] > 0 and two["examples_per_s"] > 0
    assert two["span_s"] > 0
