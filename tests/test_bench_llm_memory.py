"""The big-base benchmark (benchmarks/llm_memory.py) on a tiny Llama: each worker builds the model
in the dtype and with the checkpointing it was asked for, the first step is checked, the
comparison against the fp32 row and the report block come out right. No timing is asserted."""

from __future__ import annotations

import math

import pytest

from benchmarks import llm_memory, worker_llm
from benchmarks.run import _kept_blocks


@pytest.fixture(scope="module")
def tiny_base(tmp_path_factory):
    return llm_memory.make_llama_base(llm_memory.SHAPES["tiny"], tmp_path_factory.mktemp("base"))


def _spec(base, tmp_path, kind: str, setting: tuple[str, str, bool]) -> dict:
    args = llm_memory.parse(["--quick", "--batch", "2", "--seq", "16"])
    spec = llm_memory.setting_spec(kind, setting, base, args)
    spec["probe_path"] = str(tmp_path / f"{kind}-{setting[1]}-{setting[2]}.safetensors")
    return spec


def _row(spec: dict, setting: tuple[str, str, bool]) -> dict:
    result = worker_llm.run(spec)
    result["max_rss_mb"] = 100.0 if setting[1] == "float32" else 60.0  # run_worker's, stood in
    return {"kind": spec["kind"], "step": llm_memory.STEPS[spec["kind"]], "setting": setting[0],
            "load": "0.5 0.5 0.5", "result": result, "probe": spec["probe_path"]}  # fmt: skip


def test_the_worker_builds_the_asked_dtype_and_checkpointing(tiny_base, tmp_path):
    setting = ("bf16 + ckpt", "bfloat16", True)
    result = worker_llm.run(_spec(tiny_base, tmp_path, "single_train", setting))
    assert result["dtypes"] == {
        "base": ["torch.bfloat16"],
        "added": ["torch.float32"],
        "trainable": ["torch.float32"],
    }
    assert result["checkpointing"] is True
    assert result["loss_finite"] and result["all_losses_finite"]
    assert result["nonzero_grad_tensors"] == result["grad_tensors"] > 0
    assert result["zero_grad_tensors"] == []
    assert len(result["times"]) == 1


def test_a_fusion_on_an_fp32_base_and_the_comparison(tiny_base, tmp_path):
    settings = [("fp32", "float32", False), ("bf16", "bfloat16", False)]
    rows = [_row(_spec(tiny_base, tmp_path, "fusion_train", s), s) for s in settings]
    fp32, bf16 = (row["result"] for row in rows)
    assert fp32["dtypes"]["base"] == ["torch.float32"] and fp32["checkpointing"] is False
    assert bf16["dtypes"]["base"] == ["torch.bfloat16"]
    # only the key biases get no gradient: softmax does not change when every score moves by q·b
    assert {name.rsplit(".", 2)[-2:][0] for name in fp32["zero_grad_tensors"]} == {"key"}
    llm_memory.compare(rows)
    assert rows[0]["vs_fp32"]["hidden"] == 0.0
    diff = rows[1]["vs_fp32"]
    assert 0.0 < diff["hidden"] < 0.05 and 0.0 < diff["logits"] < 0.05
    assert diff["grad_cosine"] > 0.99 and math.isfinite(diff["loss"])

    payload = {"meta": {"argv": " --quick", "date": "today", "wall_s": 60.0, "load_before": "1",
                        "load_after": "1", "machine": "cpu", "threads": 2,
                        "versions": {"torch": "t"}, "shape": llm_memory.SHAPES["tiny"],
                        "batch": 2, "seq": 16, "grad_sample": worker_llm.GRAD_SAMPLE},
               "rows": rows}  # fmt: skip
    block = llm_memory.markdown(payload)
    assert block.startswith(llm_memory.BEGIN) and block.rstrip().endswith(llm_memory.END)
    assert "| fusion (N=4) | bf16 | 60 | 40 % | " in block
    assert "| fusion (N=4) | fp32 | 100 | — | " in block
    assert "(zero: mlp.fusions.fusion.key.bias)" in block


def test_the_block_replaces_its_old_self(tmp_path):
    md = tmp_path / "RESULTS.md"
    old = f"{llm_memory.BEGIN}\nold\n{llm_memory.END}"
    md.write_text(f"# head\n\n{old}\n\n<!-- other:begin -->\nkept\n<!-- other:end -->\n")
    llm_memory.write_block(md, f"{llm_memory.BEGIN}\nnew\n{llm_memory.END}\n")
    text = md.read_text()
    assert "new" in text and "old" not in text and "kept" in text and text.startswith("# head")
    assert _kept_blocks(md, {"llm-memory": "fresh"}) == (
        "\nfresh\n\n<!-- other:begin -->\nkept\n<!-- other:end -->\n"
    )
    assert _kept_blocks(md, {"more": "added"}).endswith("\nadded\n")


def test_only_picks_rows_by_name():
    names = [llm_memory.row_name(k, s[0]) for k, s in llm_memory.selected("st-a-fp32,fusion-bf16")]
    assert names == ["st-a-fp32", "st-a-fp32+ckpt", "fusion-bf16", "fusion-bf16+ckpt"]
    assert len(llm_memory.selected(None)) == 8
