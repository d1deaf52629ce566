"""The live-tensor memory benchmark (benchmarks/live_memory.py) on a tiny Llama: the profiler's
memory events give a peak for each step, at least what its backward must keep and growing with
the tokens of a step; the reference's step is measured in its own venv. No timing is asserted."""

from __future__ import annotations

import json

import pytest

from benchmarks import live_memory, refenv
from benchmarks.llm_memory import SHAPES, make_llama_base

SHAPE = SHAPES["tiny"]
# every layer's bf16 input is kept for the backward through the layers above it
KEPT_AT_128 = 128 * SHAPE["hidden_size"] * 2 * SHAPE["num_hidden_layers"] / 2**20


@pytest.fixture(scope="module")
def tiny_base(tmp_path_factory):
    return make_llama_base(SHAPE, tmp_path_factory.mktemp("base"))


def _measure(base, *sides: str) -> dict:
    args = live_memory.parse(
        ["--shape", "tiny", "--n", "4", "--batch", "2", "--seq", "16", "64", "--sides", *sides]
    )
    return live_memory.measure(args, base)


def test_peaks_hold_what_the_backward_keeps_and_grow_with_the_tokens(tiny_base):
    result = _measure(tiny_base, "ours")
    peaks = {(r["kind"], r["tokens"]): r["peak_live_mib"] for r in result["rows"]}
    assert set(peaks) == {(k, t) for k in ("base_train", "fusion_train") for t in (32, 128)}
    for kind in ("base_train", "fusion_train"):
        assert peaks[kind, 32] < peaks[kind, 128] and peaks[kind, 128] > KEPT_AT_128
    assert set(result["mib_per_token"]) == {"ours base_train", "ours fusion_train"}
    assert all(slope > 0 for slope in result["mib_per_token"].values())
    text = live_memory.table(result)
    assert "| ours' fusion step | 128 |" in text
    assert "MiB per token: the frozen base alone (the floor) " in text
    json.dumps(result)  # what main writes


@pytest.mark.skipif(
    not refenv.python_of(refenv.venv_dir()).exists(),
    reason="the reference venv is not built (make ref-venv)",
)
def test_the_reference_step_is_measured_in_its_own_venv(tiny_base):
    result = _measure(tiny_base, "reference")
    rows = {r["tokens"]: r for r in result["rows"]}
    assert set(rows) == {32, 128} and {r["side"] for r in rows.values()} == {"reference"}
    small, large = rows[32]["peak_live_mib"], rows[128]["peak_live_mib"]
    assert small < large and large > KEPT_AT_128
    assert result["mib_per_token"]["reference fusion_train"] > 0
    assert "| the reference's fusion step | 32 |" in live_memory.table(result)
