"""Big bases: the memory a bf16 base and activation checkpointing save, on a Llama shape.

    python -m benchmarks.llm_memory                  # 2 steps × 4 settings (~20 min, 2 busy cores)
    python -m benchmarks.llm_memory --batch 4        # a smaller batch
    python -m benchmarks.llm_memory --quick          # smoke test: a tiny Llama, 1 repetition
    python -m benchmarks.llm_memory --only st-a-fp32 # rows named st-a-fp32 and st-a-fp32+ckpt

A Llama-shaped base with random weights (hidden 2048, 8 layers, 16 heads with 4 key/value heads,
intermediate 5632, vocab 32000: 0.43 B parameters), built from its config and saved once in
bfloat16, as Llama checkpoints are (so the float32 and bfloat16 bases hold the same numbers and
they differ only in the arithmetic). For each step, an ST-A step (one pfeiffer adapter, rf 16)
and a fusion step over N=4 such adapters, both with a classification head on the last token,
and each of four settings (base in float32 or bfloat16, activation checkpointing off or on), a
fresh process loads the base through the project's `load_encoder` (`BaseModelSpec`, as a run
with `base_model_dtype` and `gradient_checkpointing` does), adds the adapters, checks the first
step and times the next ones (`benchmarks/worker_llm.py`).

Reported: whole-process peak RSS (from wait4, as `benchmarks.run` does), the peak RSS of the
training steps alone, seconds per step, the first step's loss and nonzero gradients, and how far
each setting's outputs and first gradients are from the float32 base without checkpointing.
Writes the block between the `llm-memory` markers in benchmarks/RESULTS.md and
benchmarks/llm_memory.json (--quick or --only: .bench/llm-memory-partial.md and .json).
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
WORK = ROOT / ".bench"
BEGIN, END = "<!-- llm-memory:begin -->", "<!-- llm-memory:end -->"
SHAPES = {
    "llama": {"hidden_size": 2048, "num_hidden_layers": 8, "num_attention_heads": 16,
              "num_key_value_heads": 4, "intermediate_size": 5632, "vocab_size": 32000},
    "tiny": {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
             "num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": 1100},
}  # fmt: skip
# (label, base_model_dtype, gradient_checkpointing); the first is what the others compare with
SETTINGS = [
    ("fp32", "float32", False),
    ("bf16", "bfloat16", False),
    ("fp32 + ckpt", "float32", True),
    ("bf16 + ckpt", "bfloat16", True),
]
REFERENCE = SETTINGS[0][0]
STEPS = {"single_train": "ST-A (1 adapter)", "fusion_train": "fusion (N=4)"}
SHORT = {"single_train": "st-a", "fusion_train": "fusion"}


def row_name(kind: str, label: str) -> str:
    """`st-a-fp32`, `fusion-bf16+ckpt`, ...: what --only matches."""
    return f"{SHORT[kind]}-{label.replace(' + ', '+')}"


def selected(only: str | None) -> list[tuple[str, tuple[str, str, bool]]]:
    """(step kind, setting) pairs whose row name contains one of the --only patterns (a,b)."""
    pairs = [(kind, setting) for kind in STEPS for setting in SETTINGS]
    if not only:
        return pairs
    patterns = [p.strip() for p in only.split(",") if p.strip()]
    return [(k, s) for k, s in pairs if any(p in row_name(k, s[0]) for p in patterns)]


def make_llama_base(shape: dict[str, int], folder: Path) -> Path:
    """A random LlamaModel of `shape`, saved in bfloat16 with save_pretrained (once)."""
    import torch
    from transformers import LlamaConfig, LlamaModel

    if (folder / "config.json").is_file():
        return folder
    from transformers.utils import logging

    logging.disable_progress_bar()
    torch.manual_seed(0)
    config = LlamaConfig(**shape, max_position_embeddings=2048, bos_token_id=1, eos_token_id=2)
    model = LlamaModel(config).to(torch.bfloat16)
    model.save_pretrained(folder)
    return folder


def setting_spec(kind: str, setting: tuple[str, str, bool], base: Path, args) -> dict:
    """The worker's spec for one step kind in one setting."""
    return {
        "kind": kind,
        "n": 1 if kind == "single_train" else 4,
        "lr": 1e-4 if kind == "single_train" else 5e-5,
        "base_dir": str(base),
        "base_dtype": setting[1],
        "checkpointing": setting[2],
        "pooling": "last",
        "batch": args.batch,
        "seq": args.seq,
        "seed": 0,
        "reps": args.reps,
        "budget_s": args.budget,
        "threads": args.threads,
    }


def measure(args, folder: Path) -> list[dict[str, Any]]:
    """Every step kind × setting, each in a fresh worker process; rows in that order."""
    from benchmarks.run import _load, run_worker

    base = make_llama_base(SHAPES[args.shape], WORK / f"base-llama-{args.shape}")
    rows = []
    for kind, setting in selected(args.only):
        spec = setting_spec(kind, setting, base, args)
        where = folder / f"{kind}-{setting[1]}-{int(setting[2])}"
        spec["probe_path"] = str(where / "probe.safetensors")
        load = _load()
        print(f"{STEPS[kind]}, {setting[0]} ...", end=" ", flush=True)
        result = run_worker(sys.executable, "llm", spec, where, args.threads)
        print(_one_line(result), flush=True)
        row = {"kind": kind, "step": STEPS[kind], "setting": setting[0], "load": load}
        row["result"] = result
        row["probe"] = spec["probe_path"]
        rows.append(row)
    return rows


def _one_line(result: dict) -> str:
    if "error" in result:
        return "FAILED " + result["error"][-300:]
    return (
        f"{statistics.median(result['times']):.2f} s/step, peak RSS {result['max_rss_mb']:.0f} "
        f"MiB (training steps {result.get('training_peak_rss_mb') or 0:.0f}), "
        f"loss {result['first_loss']:.4f}"
    )


def relative(a, b) -> float:  # noqa: ANN001 - tensors
    """max |a − b| / max |b|, the measure of the agreement check in benchmarks/run.py."""
    return float((a - b).abs().max() / b.abs().max().clamp_min(1e-30))


def compare(rows: list[dict[str, Any]]) -> None:
    """Add to each row how far its probe is from the first setting's of the same step kind:
    last hidden states and logits before training, the first step's loss and gradients."""
    import torch
    from safetensors.torch import load_file

    references: dict[str, tuple[dict, dict]] = {}
    for row in rows:
        result = row["result"]
        if "error" in result or not Path(row["probe"]).is_file():
            continue
        probe = load_file(row["probe"])
        if row["setting"] == REFERENCE:
            references[row["kind"]] = (probe, result)
        if row["kind"] not in references:
            continue  # the fp32 row failed: nothing to compare with
        ref, ref_result = references[row["kind"]]
        grad, ref_grad = probe["grad_sample"], ref["grad_sample"]
        row["vs_fp32"] = {
            "hidden": relative(probe["hidden"], ref["hidden"]),
            "logits": relative(probe["logits"], ref["logits"]),
            "loss": abs(result["first_loss"] - ref_result["first_loss"]),
            "grad_cosine": float(torch.nn.functional.cosine_similarity(grad, ref_grad, dim=0)),
            "grad_l2": float((grad - ref_grad).norm() / ref_grad.norm().clamp_min(1e-30)),
        }


def _fmt(x: float | None, spec: str) -> str:
    return "—" if x is None else format(x, spec)


def _saved(value: float | None, fp32: float | None) -> str:
    """The share of the fp32 row's figure that `value` saves; `—` for that row itself."""
    if not value or not fp32:
        return "—"
    return f"{100 * (1 - value / fp32):.0f} %"


def _memory_line(row: dict, fp32: dict) -> str:
    r = row["result"]
    if "error" in r:
        return f"| {row['step']} | {row['setting']} | failed: {r['error'][-200:]} |"
    times, cpu = r["times"], r["cpu_times"]
    train_peak = r.get("training_peak_rss_mb")
    return (
        f"| {row['step']} | {row['setting']} | {r['max_rss_mb']:.0f} | "
        f"{_saved(r['max_rss_mb'], fp32.get('max_rss_mb'))} | {r['rss_after_setup_mb']:.0f} | "
        f"{_fmt(train_peak, '.0f')} | "
        f"{_saved(train_peak, fp32.get('training_peak_rss_mb'))} | "
        f"{statistics.median(times):.2f} ({min(times):.2f}–{max(times):.2f}) | "
        f"{statistics.median(cpu):.2f} | {row['load'].split()[0]} |"
    )


def _check_line(row: dict) -> str:
    r, v = row["result"], row.get("vs_fp32")
    if "error" in r:
        return f"| {row['step']} | {row['setting']} | failed |"
    dtypes = r["dtypes"]
    finite = "yes" if r["loss_finite"] and r["all_losses_finite"] else "**no**"
    cells = (
        [f"{v['hidden']:.1e}", f"{v['logits']:.1e}", f"{v['loss']:.1e}", f"{v['grad_cosine']:.4f}"]
        if v
        else ["—"] * 4
    )
    zero = sorted({re.sub(r"^.*\.layers\.\d+\.", "", n) for n in r["zero_grad_tensors"]})
    grads = f"{r['nonzero_grad_tensors']}/{r['grad_tensors']}" + (
        f" (zero: {', '.join(zero)})" if zero else ""
    )
    return (
        f"| {row['step']} | {row['setting']} | {'/'.join(d[6:] for d in dtypes['base'])} | "
        f"{'/'.join(d[6:] for d in dtypes['trainable'])} | {'on' if r['checkpointing'] else 'off'}"
        f" | {r['first_loss']:.4f} | {finite} | {grads} | " + " | ".join(cells) + " |"
    )


def markdown(payload: dict[str, Any]) -> str:
    m, rows = payload["meta"], payload["rows"]
    first = next((r["result"] for r in rows if "error" not in r["result"]), {})
    shape = ", ".join(f"{k} {v}" for k, v in m["shape"].items())
    lines = [
        BEGIN,
        "## Big bases: bf16 and activation checkpointing on a Llama shape",
        "",
        f"`python -m benchmarks.llm_memory{m['argv']}` on {m['date']} ({m['wall_s'] / 60:.1f} min;"
        f" load average {m['load_before']} before, {m['load_after']} after; {m['machine']}, "
        f"torch threads {m['threads']}; torch {m['versions'].get('torch')}, transformers "
        f"{m['versions'].get('transformers')}; attention `{first.get('attn_implementation')}`).",
        "",
        f"A random LlamaModel ({shape}; {first.get('base_params', 0) / 1e6:.3g} M parameters) "
        "saved in bfloat16; each row is a fresh process that loads it with `load_encoder` in the "
        "row's dtype, with or without activation checkpointing, adds pfeiffer rf 16 adapters and "
        "a classification head pooling the last token, and trains (AdamW; the fusion adds its V "
        f"regulariser) on {m['batch']}×{m['seq']} seeded random tokens: one checked warm-up "
        "step, then timed steps. *Peak RSS* is the whole process's (wait4), loading included; "
        "*RSS after loading* is taken once the model with its adapters, head and optimizer is "
        "built, before the first step; *training peak* is the peak RSS from there to the end "
        "(VmHWM reset through /proc/self/clear_refs). Saved: against the fp32 row of the same "
        "step.",
        "",
        "| step | base | peak RSS MiB | saved | RSS after loading MiB | training peak MiB | saved "
        "| s/step median (min–max) | CPU s/step | load at start |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        fp32 = next(
            (r["result"] for r in rows if r["kind"] == row["kind"] and r["setting"] == REFERENCE),
            {},
        )
        fp32 = {} if row["setting"] == REFERENCE or "error" in fp32 else fp32
        lines.append(_memory_line(row, fp32))
    lines += [
        "",
        "Training works in each setting, and the bf16 base stays close to the fp32 one: the "
        "dtypes the model was built with, the first step's loss, whether every step's loss was "
        "finite, trainable tensors with a nonzero gradient, and against the fp32 row of the same "
        "step: relative difference max |x − x_fp32| / max |x_fp32| of the last hidden states and "
        "the logits (2 probe sequences, eval mode, before training), |Δ loss| of the first step, "
        f"and the cosine of its gradients (the first {m['grad_sample']} elements of every "
        "trainable tensor).",
        "",
        "| step | setting | base dtype | trainable dtype | checkpointing | first loss | finite "
        "| nonzero grads | hidden rel. diff | logits rel. diff | Δ loss | grad cosine |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
        *[_check_line(row) for row in rows],
        END,
    ]
    return "\n".join(lines) + "\n"


def write_block(md_path: Path, block: str) -> None:
    """Replace the text between the llm-memory markers in `md_path` (or append it)."""
    text = md_path.read_text() if md_path.is_file() else ""
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        text = head + block.rstrip("\n") + rest.split(END, 1)[1]
    else:
        text = text.rstrip("\n") + ("\n\n" if text else "") + block
    md_path.write_text(text)


def run(args, argv: list[str]) -> dict[str, Any]:
    """Measure, compare and describe: the payload of llm_memory.json."""
    from benchmarks.run import _load, _machine, _ours_versions
    from benchmarks.worker_llm import GRAD_SAMPLE

    started, load_before = time.perf_counter(), _load()
    WORK.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="llm-", dir=WORK) as tmp:
        rows = measure(args, Path(tmp))
        compare(rows)
    machine = _machine(args.threads)
    meta = {
        "argv": "".join(f" {a}" for a in argv),
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "wall_s": time.perf_counter() - started,
        "load_before": load_before,
        "load_after": _load(),
        "machine": f"{machine['cpu']}, {machine['cores']} cores",
        "threads": args.threads,
        "versions": _ours_versions(),
        "shape": SHAPES[args.shape],
        "batch": args.batch,
        "seq": args.seq,
        "grad_sample": GRAD_SAMPLE,
    }
    for row in rows:
        row.pop("probe", None)
    return {"meta": meta, "rows": rows}


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a tiny Llama, 1 repetition")
    parser.add_argument("--batch", type=int, default=8, help="sequences per step")
    parser.add_argument("--seq", type=int, default=128, help="tokens per sequence")
    parser.add_argument("--reps", type=int, default=None, help="exactly this many timed steps")
    parser.add_argument("--budget", type=float, default=30.0, help="seconds of timed steps")
    parser.add_argument("--threads", type=int, default=2, help="torch threads per process")
    parser.add_argument("--only", help="rows whose name contains this (a,b: any), e.g. st-a-fp32")
    args = parser.parse_args(argv)
    args.shape = "tiny" if args.quick else "llama"
    if args.quick and args.reps is None:
        args.reps = 1
    return args


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse(argv)
    payload = run(args, argv)
    partial = args.quick or bool(args.only)
    md_path = WORK / "llm-memory-partial.md" if partial else HERE / "RESULTS.md"
    json_path = WORK / "llm-memory-partial.json" if partial else HERE / "llm_memory.json"
    json_path.write_text(json.dumps(payload, indent=1, default=str) + "\n")
    block = markdown(payload)
    write_block(md_path, block)
    print()
    print(block)
    print(f"written: {md_path.relative_to(ROOT)}, {json_path.relative_to(ROOT)}")
    return 1 if any("error" in r["result"] for r in payload["rows"]) else 0


if __name__ == "__main__":
    sys.exit(main())
