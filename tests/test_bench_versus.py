"""The side-by-side benchmarks added for the GPU and for decoder bases: what runs without a GPU.

`benchmarks/gpu_versus.py` and `benchmarks/profile_fusion.py` report ratios against the reference
and against the floor; `benchmarks/llm_versus.py` runs both implementations on a tiny Llama here
(the reference venv of `make ref-venv`; skipped without it). No timing is asserted.
"""

from __future__ import annotations

import platform
from pathlib import Path

import pytest
import torch

from benchmarks import gpu_versus, llm_versus, profile_fusion, refenv
from benchmarks.gpu_check import cuda_test_files, missing
from benchmarks.run import OURS, REF


def test_the_cuda_tests_are_collected_from_the_files_that_have_them():
    files = cuda_test_files()
    assert {"tests/training/test_training_runtime.py", "tests/test_bench_versus.py"} <= set(files)
    assert "tests/test_layering.py" not in files
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
        "floor-graphs": {"title": "floor, graphs", OURS: {"ms": 4.0, "gpu_peak_mib": 100}},
        "fusion-train-n16-graphs": {"title": "fusion, graphs", OURS: {"ms": 8.0,
                                                                      "gpu_peak_mib": 250}},
    }  # fmt: skip
    ratios = gpu_versus.ratios(rows)
    assert ratios["fusion-train-n16-graphs speed-up"] == 6.25  # against the reference's eager
    assert ratios["fusion-train-n16-graphs / floor-graphs"] == 2.0
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
    floor_largest = profile_fusion.largest(floor, top=1)
    assert floor_largest == [{"op": "aten::mm", "ms": 10.0, "share": 0.909, "calls": 4}]
    result = {"device": "cpu", "floor_ms": 11.0, "fusion_ms": 17.5, "above_floor": rows,
              "floor_largest": floor_largest}  # fmt: skip
    text = profile_fusion.markdown(result)
    assert "(1.59× the floor)" in text
    assert "The floor's own largest operators: `aten::mm` 10.0 ms (91 %, 4 calls)." in text


def test_llm_versus_autocasts_ours_on_the_cpu_only_when_asked(tmp_path):
    args = llm_versus.parse(["--out", str(tmp_path)])
    assert "autocast" not in llm_versus.spec_for(4, tmp_path, args, OURS)
    assert llm_versus.spec_for(4, tmp_path, args, REF)["autocast"] == "bf16"
    args = llm_versus.parse(["--out", str(tmp_path), "--autocast"])
    assert llm_versus.spec_for(4, tmp_path, args, OURS)["autocast"] == "bf16"


@pytest.mark.skipif(
    not refenv.python_of(refenv.venv_dir()).exists(),
    reason="the reference venv is not built (make ref-venv)",
)
def test_llm_versus_runs_both_sides_on_a_tiny_llama_and_reports_the_growth(tmp_path):
    """With --checkpointing, which each side must turn on in its own way and report."""
    args = llm_versus.argparse.Namespace(
        n=[2, 4],
        batch=2,
        seq=16,
        reps=1,
        threads=1,
        device="cpu",
        shape="tiny",
        out=tmp_path,
        sides=[OURS, REF],
        checkpointing=True,
        malloc_trim=False,
        autocast=False,
        timeout_s=600,
    )
    result = llm_versus.measure(args)
    for row in result["rows"]:
        for side in (OURS, REF):
            assert row[side]["peak_mib"] > 100, row  # a whole process: torch alone is more
            assert row[side]["s_per_step"] > 0
            assert row[side]["checkpointing"] is True, row
        assert row[OURS]["trainable_params"] == row[REF]["trainable_params"]
    assert set(result["growth_mib_per_adapter"]) == {OURS, REF}
    assert "| 4 |" in llm_versus.markdown(result)


@pytest.mark.skipif(
    not refenv.python_of(refenv.venv_dir()).exists(),
    reason="the reference venv is not built (make ref-venv)",
)
def test_the_gpu_checks_llm_context_step_gives_the_ratio_and_each_sides_cost_a_token(tmp_path):
    """`make gpu-check`'s step for #24 item 3, on a tiny Llama on the CPU: N = 16, two lengths."""
    from benchmarks.gpu_check import llm_context

    figures = llm_context(tmp_path, 0, device="cpu", shape="tiny", seqs=(8, 16))
    assert set(figures["rows"]) == {"8x8", "8x16"}
    for row in figures["rows"].values():
        assert row[OURS]["trainable_params"] == row[REF]["trainable_params"] > 0
    assert figures["memory_ratio_8x16"] > 0
    assert set(figures["mib_per_token"]) == {OURS, REF}
    assert (tmp_path / "llm-versus-8x16.json").is_file()


def test_a_worker_past_its_time_limit_is_killed_and_its_row_says_so(tmp_path):
    import sys

    from benchmarks.run import run_worker

    spec = {"kind": "fusion_train", "base_dir": str(tmp_path / "base"), "batch": 2, "seq": 8,
            "seed": 0, "n": 2, "lr": 1e-4, "warmup": 1, "reps": 1, "budget_s": 10}  # fmt: skip
    # importing torch alone takes longer than the limit
    result = run_worker(sys.executable, OURS, spec, tmp_path / "w", threads=1, timeout_s=0.25)
    assert result["error"] == "killed at its time limit, 0.25 s"


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="malloc_trim is glibc's")
def test_malloc_trim_gives_the_heaps_free_pages_back():
    from benchmarks import common

    blocks = [bytearray(64 * 1024) for _ in range(1600)]  # 100 MiB under the mmap threshold
    top = blocks.pop()  # kept: the freed blocks below it cannot shrink the heap by themselves
    del blocks
    held = common.rss_mb()
    assert common.malloc_trim()
    assert held - common.rss_mb() > 50, "the freed 100 MiB stayed resident"
    del top


def test_the_malloc_trim_benchmark_times_the_same_step_with_and_without_the_call(
    tmp_path, monkeypatch
):
    from benchmarks import common, malloc_trim

    calls = []
    real = common.malloc_trim
    monkeypatch.setattr(common, "malloc_trim", lambda: calls.append(1) or real())
    result = malloc_trim.measure(
        steps=2, out=tmp_path, cases=[("minilm", "single_train", 1, 2)], seq=16
    )
    assert len(calls) == 2 + 2 + 1  # its warm-up and timed steps, the check of the C library
    (row,) = result["rows"]
    assert row["plain_s"] > 0 and row["trim_s"] > 0
    assert row["ratio"] == pytest.approx(row["trim_s"] / row["plain_s"])
    assert "| single_train N=1 minilm | 2×16 |" in malloc_trim.markdown(result)
    assert (tmp_path / "malloc-trim.json").exists()


def test_the_first_token_benchmark_times_the_whole_last_layer_against_the_cut(
    tmp_path, monkeypatch
):
    from benchmarks import first_token, worker_ours

    widths: list[int] = []

    def step_of(spec):  # the benchmark's own step, with the last layer's width recorded
        step, model, params = worker_ours.step_of(spec)
        norm = model.encoder_model.encoder.layer[-1].output.LayerNorm
        norm.register_forward_pre_hook(lambda _m, args: widths.append(args[0].shape[1]))
        return step, model, params

    monkeypatch.setattr(first_token, "step_of", step_of)
    result = first_token.measure(
        steps=2, out=tmp_path, cases=[("minilm", "single_train", 1, 2)], seq=16
    )
    assert sorted(widths) == [1] * 4 + [16] * 4  # two untimed and two timed steps of each
    (row,) = result["rows"]
    assert row["whole_s"] > 0 and row["cut_s"] > 0
    assert row["saved"] == pytest.approx(1 - row["cut_s"] / row["whole_s"])
    assert "| single_train N=1 minilm | 2×16 |" in first_token.markdown(result)
    assert (tmp_path / "first-token.json").exists()


def test_the_dropout_benchmark_times_torch_s_dropout_against_the_packed_one(tmp_path, monkeypatch):
    from torch import nn

    from adapterfleet.adapters.dropout import PackedDropout
    from benchmarks import dropout, worker_ours

    kinds: list[type] = []

    def step_of(spec):  # the benchmark's own step, with the embeddings' dropout's class recorded
        step, model, params = worker_ours.step_of(spec)
        module = model.encoder_model.embeddings.dropout
        module.register_forward_pre_hook(lambda m, _args: kinds.append(type(m)))
        return step, model, params

    monkeypatch.setattr(dropout, "step_of", step_of)
    result = dropout.measure(
        steps=2, out=tmp_path, cases=[("minilm", "single_train", 1, 2)], seq=16
    )
    # the hooked 1 + 3 steps of each, then two untimed and two timed steps of each
    assert kinds.count(nn.Dropout) == kinds.count(PackedDropout) == 8
    (row,) = result["rows"]
    assert row["torch_dropout_s"] > 0 and row["packed_dropout_s"] > 0
    assert row["saved"] == pytest.approx(1 - row["packed_s"] / row["torch_s"])
    assert "| single_train N=1 minilm | 2×16 |" in dropout.markdown(result)
    assert (tmp_path / "dropout.json").exists()


def test_the_attention_dropout_benchmark_times_sdpa_against_the_packed_one(tmp_path, monkeypatch):
    from adapterfleet.adapters.attention import NAME
    from benchmarks import attention_dropout, worker_ours

    used: list[str] = []

    def step_of(spec):  # the benchmark's own step, with the attention each step runs recorded
        step, model, params = worker_ours.step_of(spec)
        module = model.encoder_model.encoder.layer[0].attention.self
        module.register_forward_pre_hook(
            lambda m, _args: used.append(m.config._attn_implementation)
        )
        return step, model, params

    monkeypatch.setattr(attention_dropout, "step_of", step_of)
    result = attention_dropout.measure(
        steps=2, out=tmp_path, cases=[("minilm", "single_train", 1, 2)], seq=16
    )
    # the hooked 1 + 3 steps of each, then two untimed and two timed steps of each
    assert used.count("sdpa") == used.count(NAME) == 8
    (row,) = result["rows"]
    assert row["sdpa_attention_s"] > 0 and row["packed_attention_s"] > 0
    assert row["saved"] == pytest.approx(1 - row["packed_s"] / row["sdpa_s"])
    assert "| single_train N=1 minilm | 2×16 |" in attention_dropout.markdown(result)
    assert (tmp_path / "attention_dropout.json").exists()


def test_a_scripted_configuration_rewrites_its_table_in_place(tmp_path):
    from benchmarks.run import Bench, _fresh_blocks, _kept_blocks, suite

    names = {b.name: b for b in suite(quick=False)}
    assert all(names[n].optional for n in ("fusion-profile", "llm-versus", "packing"))
    bench = Bench("fusion-profile", "t", "fusion_profile", {})
    bench.results[OURS] = {"device": "cpu", "floor_ms": 2.0, "fusion_ms": 3.0, "above_floor": []}
    report = tmp_path / "RESULTS.md"
    table = "<!-- fusion-profile-table:begin -->\nold\n<!-- fusion-profile-table:end -->\n"
    report.write_text("<!-- notes:begin -->\nkept\n<!-- notes:end -->\n\n" + table)
    kept = _kept_blocks(report, _fresh_blocks([bench]))
    assert "kept" in kept and "old" not in kept
    assert kept.index("notes:end") < kept.index("(1.50× the floor)") < kept.index("table:end")


class _Split:
    """The fields of a TokenizedSplit that packing reads, from real MiniLM tokenisation."""

    def __init__(self, pairs: list[tuple[str, str]]) -> None:
        from adapterfleet.adapters import load_tokenizer

        encoded = load_tokenizer("minilm-l6")([a for a, _ in pairs], [b for _, b in pairs])
        self.input_ids = encoded["input_ids"]
        self.token_type_ids = encoded["token_type_ids"]
        self.lengths = [len(ids) for ids in self.input_ids]
        self.labels = [i % 2 for i in range(len(pairs))]

    def __getitem__(self, i: int) -> dict:
        return {"input_ids": self.input_ids[i], "token_type_ids": self.token_type_ids[i],
                "label": self.labels[i], "length": self.lengths[i]}  # fmt: skip


def test_packing_keeps_examples_apart_and_gives_the_logits_of_each_alone():
    from benchmarks import packing

    assert packing.pack([100, 60, 50, 30, 20], capacity=128) == [[0, 4], [1, 2], [3]]
    words = ["the", "cat", "sat", "on", "a", "mat", "while", "it", "rained", "over", "the", "town"]
    pairs = [(" ".join(words[: 3 + i % 9]), " ".join(words[i % 9 :])) for i in range(16)]
    split = _Split(pairs)
    rows = packing.pack(split.lengths)
    assert len(rows) < len(pairs)  # several examples share a row
    batch = packing.collate_packed(split, rows, pad_id=0)
    first, second = batch["starts"][0], batch["starts"][1]
    assert batch["rows"][0] == batch["rows"][1] and second == first + split.lengths[rows[0][0]]
    mask = batch["attention_mask"][0, 0]
    assert mask[first, first] and not mask[first, second] and not mask[second, first]
    assert batch["position_ids"][0, second] == 0  # positions restart per example
    assert packing.exactness(split, pad_id=0) < 1e-5


def test_the_bench_lists_its_configurations_and_refuses_an_unknown_only(capsys):
    from benchmarks import run

    assert run.main(["--only", "nothing-such"]) == 1
    assert "no configuration matches --only 'nothing-such'" in capsys.readouterr().err
    assert run.main(["--list", "--only", "b32"]) == 0
    assert capsys.readouterr().out.startswith("fusion-train-b32-bert-base-n16  fusion training")


def _varlen_split() -> object:
    """16 examples of random token ids, 6 to 40 long (no tokenizer: a GPU machine may lack the
    packaged MiniLM), as the TokenizedSplit that packing reads."""
    from adapterfleet.data.cache import TokenizedSplit

    generator = torch.Generator().manual_seed(0)
    lengths = [6 + (7 * i) % 35 for i in range(16)]
    ids = [[101, *torch.randint(1000, 30000, (n - 2,), generator=generator).tolist(), 102]
           for n in lengths]  # fmt: skip
    return TokenizedSplit(task="t", split="train", path=Path("."), key="", from_cache=False,
                          input_ids=ids, token_type_ids=[[0] * n for n in lengths],
                          labels=[i % 2 for i in range(16)], lengths=lengths)  # fmt: skip


def test_varlen_runs_a_batch_as_one_row_with_attention_within_each_example():
    from benchmarks import packing, varlen

    split = _varlen_split()
    batch = varlen.collate_varlen(split, [0, 3, 5])
    lengths = [split.lengths[i] for i in (0, 3, 5)]
    assert batch["cu"].tolist() == [0, lengths[0], lengths[0] + lengths[1], sum(lengths)]
    assert batch["cu"].dtype == torch.int32 and batch["input_ids"].shape == (1, sum(lengths))
    assert batch["position_ids"][0, lengths[0]] == 0 and batch["longest"] == max(lengths)
    assert packing.exactness(split, pad_id=0, variant="varlen", shape="minilm") < 1e-5  # SDPA/span
    assert varlen.why_not("cpu") == "varlen_attn runs on CUDA devices only, not on cpu"
    assert packing.variants("cpu") == ("padded", "packed")
    model, params = packing.st_a_model(0, "minilm", attention_dropout=0.0)
    varlen.use_varlen(model.encoder_model)
    logits = varlen.varlen_logits(model, batch)
    torch.nn.functional.cross_entropy(logits, batch["labels"]).backward()
    assert logits.shape == (3, 2) and all(p.grad is not None for p in params)


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_varlen_flash_attention_gives_the_logits_of_each_example_alone_on_a_gpu():
    from benchmarks import packing, varlen

    assert varlen.why_not("cuda") is None
    # bf16 autocast on both sides: the relative difference is bf16's
    assert packing.exactness(_varlen_split(), 0, "varlen", shape="minilm", device="cuda") < 3e-2


def test_our_worker_runs_where_the_project_is_not_installed(tmp_path: Path):
    """On a lent GPU machine the project is a working tree, not an installed package: our
    worker still imports it (its `src` on the worker's path), with this venv's other packages
    seen through a `.pth` file of a bare venv."""
    import subprocess
    import sys
    import sysconfig

    from transformers import BertConfig, BertModel

    from benchmarks.run import run_worker

    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    python = bare / "bin" / "python"
    purelib = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    Path(purelib, "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    probe = subprocess.run([python, "-c", "import adapterfleet"], capture_output=True, cwd=tmp_path)
    assert probe.returncode != 0  # installed nowhere this python looks
    config = BertConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=64, vocab_size=1200)  # fmt: skip
    BertModel(config, add_pooling_layer=False).save_pretrained(tmp_path / "base")
    spec = {"kind": "fusion_train", "base_dir": str(tmp_path / "base"), "batch": 2, "seq": 8,
            "seed": 0, "n": 2, "lr": 1e-4, "warmup": 1, "reps": 1, "budget_s": 10}  # fmt: skip
    result = run_worker(str(python), OURS, spec, tmp_path / "worker", threads=1)
    assert "error" not in result, result.get("error")
    assert len(result["times"]) == 1


def test_llm_versus_runs_ours_in_the_precision_a_run_picks_and_the_reference_under_autocast(
    tmp_path,
):
    """`precision: auto`: float32 on the CPU, bf16 autocast on a GPU; the reference always bf16."""
    for device, ours in (("cpu", None), ("cuda", "bf16")):
        args = llm_versus.parse(["--device", device])
        assert llm_versus.spec_for(16, tmp_path, args, OURS).get("autocast") == ours
        assert llm_versus.spec_for(16, tmp_path, args, REF)["autocast"] == "bf16"
