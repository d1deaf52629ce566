"""The side-by-side benchmarks added for the GPU and for decoder bases: what runs without a GPU.

`benchmarks/gpu_versus.py` and `benchmarks/profile_fusion.py` report ratios against the reference
and against the floor; `benchmarks/llm_versus.py` runs both implementations on a tiny Llama here
(the reference venv of `make ref-venv`; skipped without it). No timing is asserted.
"""

from __future__ import annotations

import pytest

from benchmarks import gpu_versus, llm_versus, profile_fusion, refenv
from benchmarks.gpu_check import cuda_test_files, missing
from benchmarks.run import OURS, REF


def test_the_cuda_tests_are_collected_from_the_files_that_have_them():
    files = cuda_test_files()
    assert "tests/training/test_training_runtime.py" in files
    assert "tests/test_bench_versus.py" not in files
    assert missing("json", "surely_no_such_module") == ["surely_no_such_module"]


def test_gpu_versus_ratios_put_both_sides_against_each_other_and_the_floor():
    rows = {
        "floor": {"title": "floor", OURS: {"ms": 10.0, "gpu_peak_mib": 100}},
        "fusion-train-n16": {
            "title": "fusion",
            OURS: {"ms": 20.0, "gpu_peak_mib": 200},
            REF: {"ms": 50.0, "gpu_peak_mib": 500},
        },
        "fusion-infer-n16": {"title": "infer", OURS: {"ms": 5.0, "gpu_peak_mib": 80},
                             REF: {"error": "exit 1: boom"}},
    }  # fmt: skip
    ratios = gpu_versus.ratios(rows)
    assert ratios["fusion-train-n16 speed-up"] == 2.5
    assert ratios["fusion-train-n16 memory ratio"] == 2.5
    assert ratios["fusion-train-n16 ours / floor"] == 2.0
    assert ratios["fusion-train-n16 reference / floor"] == 5.0
    assert not any(key.startswith("fusion-infer") for key in ratios)  # a failed side: no ratio
    text = gpu_versus.table({"rows": rows, "ratios": ratios})
    assert "| fusion | 20.0 | 50.0 | 2.5× | 200 | 500 | 2.5× |" in text
    assert "| infer | 5.0 | exit 1: boom | — |" in text


def test_the_profile_names_what_the_fusion_step_spends_above_the_floor():
    floor = {"aten::mm": {"ms": 10.0, "calls": 4}, "aten::gelu": {"ms": 1.0, "calls": 2}}
    fusion = {"aten::mm": {"ms": 16.0, "calls": 10}, "aten::gelu": {"ms": 1.0, "calls": 2},
              "aten::cat": {"ms": 0.5, "calls": 3}}  # fmt: skip
    rows = profile_fusion.above_floor(floor, fusion)
    assert [r["op"] for r in rows] == ["aten::mm", "aten::cat", "aten::gelu"]
    assert rows[0]["extra_ms"] == 6.0 and (rows[0]["floor_calls"], rows[0]["fusion_calls"]) == (
        4,
        10,
    )
    result = {"device": "cpu", "floor_ms": 11.0, "fusion_ms": 17.5, "above_floor": rows}
    assert "(1.59× the floor)" in profile_fusion.markdown(result)


@pytest.mark.skipif(
    not refenv.python_of(refenv.venv_dir()).exists(),
    reason="the reference venv is not built (make ref-venv)",
)
def test_llm_versus_runs_both_sides_on_a_tiny_llama_and_reports_the_growth(tmp_path):
    args = llm_versus.argparse.Namespace(
        n=[2, 4], batch=2, seq=16, reps=1, threads=1, device="cpu", shape="tiny", out=tmp_path
    )
    result = llm_versus.measure(args)
    for row in result["rows"]:
        for side in (OURS, REF):
            assert row[side]["peak_mib"] > 100, row  # a whole process: torch alone is more
            assert row[side]["s_per_step"] > 0
        assert row[OURS]["trainable_params"] == row[REF]["trainable_params"]
    assert set(result["growth_mib_per_adapter"]) == {OURS, REF}
    assert "| 4 |" in llm_versus.markdown(result)
