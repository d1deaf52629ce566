"""`make gpu-check` (benchmarks/gpu_check.py): what runs without a GPU. On this machine it says
why nothing ran; its packing benchmark runs on CPU workers of the local Ray with a tiny shape."""

from __future__ import annotations

import json
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


def test_the_predict_step_finds_the_dev_file_the_demo_writes(tmp_path):
    from adapterfleet.data.demo import generate_demo_suite
    from benchmarks.gpu_check import DELIVERY_DEV

    generate_demo_suite(tmp_path / "demo-data")
    found = sorted(tmp_path.glob(DELIVERY_DEV))
    assert [path.name for path in found] == ["delivery_dev.json"]


def test_the_console_script_is_this_venvs_and_the_base_model_reaches_the_demo(tmp_path):
    from benchmarks import gpu_check

    assert gpu_check.console_script() == str(Path(sys.executable).with_name("adapterfleet"))
    gpu_check.use_inputs(tmp_path, tmp_path / "tokens.json")
    try:
        assert f"base_model={tmp_path.resolve()}" in gpu_check.demo_args(tmp_path / "s")
        assert gpu_check.rte_tokens() == (tmp_path / "tokens.json").resolve()
    finally:
        gpu_check.use_inputs(None, None)
    assert not any(arg.startswith("base_model=") for arg in gpu_check.demo_args(tmp_path))


def test_gpu_widths_times_two_passes_over_the_same_batches_and_counts_their_widths(tmp_path):
    import json

    from benchmarks import gpu_widths

    lengths = [5 + (i * 7) % 40 for i in range(64)]
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps({"rte": {
        "input_ids": [[101, *[1000 + i] * (n - 2), 102] for i, n in enumerate(lengths)],
        "token_type_ids": [[0] * n for n in lengths],
        "labels": [i % 2 for i in range(64)], "lengths": lengths,
    }}))  # fmt: skip
    plain = gpu_widths.two_epochs("minilm", 1, True, tokens, device="cpu", limit=2)
    rounded = gpu_widths.two_epochs("minilm", 8, True, tokens, device="cpu", limit=2)
    assert plain["batches"] == rounded["batches"] == 2
    assert plain["first_epoch_s"] > 0 and plain["second_epoch_s"] > 0
    assert 1 <= rounded["widths"] <= plain["widths"] <= 2
    table = gpu_widths.markdown([plain, rounded])
    assert "| minilm | the longest row | on |" in table and "| a multiple of 8 |" in table


def test_the_report_is_written_after_each_step_so_a_cut_off_run_keeps_the_finished_ones(
    tmp_path,
):
    from benchmarks.gpu_check import run_steps

    device = {"name": "a test device", "count": 1, "memory_gib": 1.0, "bf16": True,
              "torch": torch.__version__, "cuda": "none"}  # fmt: skip
    seen: dict[str, object] = {}

    def first(out: Path, steps: int) -> dict:
        return {"figure": steps}

    def second(out: Path, steps: int) -> dict:
        seen.update(json.loads((out / "gpu-check.json").read_text()))
        raise RuntimeError("the lease ran out here")

    results = run_steps(
        ["first", "second"], tmp_path / "out", 3, device, {"first": first, "second": second}
    )
    assert seen["first"]["figure"] == 3 and "second" not in seen
    assert results["second"]["ok"] is False
    assert "the lease ran out here" in results["second"]["error"]
    written = json.loads((tmp_path / "out" / "gpu-check.json").read_text())
    assert written["device"]["name"] == "a test device" and written["second"]["ok"] is False
    assert "**first**" in (tmp_path / "out" / "gpu-check.md").read_text()
