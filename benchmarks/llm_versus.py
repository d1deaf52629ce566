"""Fusion on a Llama-shaped base, ours against the reference: memory and time as N grows.

    python -m benchmarks.llm_versus [--n 4 16 32] [--batch 4] [--seq 128] [--reps 2]
                                    [--device cpu|cuda] [--shape llama|tiny] [--out DIR]
                                    [--timeout-s 900]
                                    [--sides ours reference] [--checkpointing] [--malloc-trim]

The base is the random Llama shape of `benchmarks/llm_memory.py` (hidden 2048, 8 layers, GQA with
16 query and 4 key/value heads), saved in bfloat16 and loaded in bfloat16 by both sides; what each
side adds (N pfeiffer adapters of rf 16, the fusion, a head) is float32 and only the fusion and
head train. Ours loads it through `load_encoder` as a run with `base_model_dtype: bfloat16` does,
its step in the precision a run's `precision: auto` picks: float32 on the CPU, under bf16 autocast
on a GPU (the GPU rows of benchmarks/RESULTS.md measured until 2026-11-29 ran ours without
autocast); the reference through `AutoAdapterModel` (`LlamaAdapterModel`), its step under bf16
autocast as the Trainer's `bf16=True` runs it (its float32 adapters cannot take bfloat16 hidden
states otherwise). Each N × side is a fresh process (`benchmarks/run.py`'s workers): on the CPU the
figure is the whole process's peak RSS, on a GPU the peak GPU memory torch allocated. The growth
per adapter is the slope of the peak from the smallest to the largest N. `--checkpointing` turns
activation checkpointing on for both sides; each worker reports whether it was on.
`--malloc-trim` (ours alone) gives the heap's free pages back once per step, to see what of the
CPU peak is the allocator's (`benchmarks/malloc_trim.py` measures what that costs a step).

Writes DIR/llm-versus-<device>.json and prints the Markdown table for benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

from benchmarks.gpu_versus import reference_python
from benchmarks.llm_memory import SHAPES, WORK, make_llama_base
from benchmarks.run import OURS, REF, TIMEOUT_S, _load, run_worker

ROOT = Path(__file__).resolve().parent.parent


def spec_for(n: int, base: Path, args: argparse.Namespace, side: str) -> dict[str, Any]:
    spec = {"kind": "fusion_train", "n": n, "lr": 5e-5, "base_dir": str(base),
            "base_dtype": "bfloat16", "pooling": "last", "batch": args.batch, "seq": args.seq,
            "seed": 0, "warmup": 1, "reps": args.reps, "budget_s": 600, "threads": args.threads,
            "device": args.device, "checkpointing": args.checkpointing}  # fmt: skip
    if side == REF or args.device == "cuda" or args.autocast:
        spec["autocast"] = "bf16"
    elif args.malloc_trim:
        spec["malloc_trim"] = True
    return spec


def peak_mib(result: dict[str, Any], device: str) -> float:
    return result["gpu_peak_mb"] if device == "cuda" else result["max_rss_mb"]


def measure(args: argparse.Namespace) -> dict[str, Any]:
    pythons = {OURS: sys.executable, REF: reference_python() if REF in args.sides else ""}
    base = make_llama_base(SHAPES[args.shape], WORK / f"base-llama-{args.shape}")
    rows = []
    for index, n in enumerate(args.n):
        row: dict[str, Any] = {"n": n, "load": _load()}
        for side in [
            s for s in ((OURS, REF) if index % 2 == 0 else (REF, OURS)) if s in args.sides
        ]:
            spec = spec_for(n, base, args, side)
            result = run_worker(
                pythons[side], side, spec, args.out / f"n{n}", args.threads, args.timeout_s
            )
            if "error" in result:
                row[side] = {"error": result["error"]}
            else:
                row[side] = {
                    "s_per_step": round(statistics.median(result["times"]), 3),
                    "peak_mib": round(peak_mib(result, args.device)),
                    "trainable_params": result["trainable_params"],
                    "checkpointing": result.get("checkpointing"),
                }
            print(f"  N={n} {side}: {row[side]}", flush=True)
        rows.append(row)
    return {"device": args.device, "shape": args.shape, "batch": [args.batch, args.seq],
            "checkpointing": args.checkpointing, "rows": rows,
            "growth_mib_per_adapter": growth(rows)}  # fmt: skip


def growth(rows: list[dict[str, Any]]) -> dict[str, float | None]:
    """MiB per added adapter, from the smallest to the largest N measured."""
    found: dict[str, float | None] = {}
    for side in (OURS, REF):
        points = [(r["n"], r[side]["peak_mib"]) for r in rows if "peak_mib" in r.get(side, {})]
        if len(points) < 2:
            found[side] = None
            continue
        (n0, m0), (n1, m1) = min(points), max(points)
        found[side] = round((m1 - m0) / (n1 - n0), 1)
    return found


def markdown(result: dict[str, Any]) -> str:
    what = "peak GPU memory MiB" if result["device"] == "cuda" else "peak RSS MiB"
    lines = [
        f"| N | ours {what} | reference {what} | memory ratio | ours s/step | reference s/step "
        "| speed-up | load at start |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in result["rows"]:
        ours, ref = row.get(OURS, {}), row.get(REF, {})
        memory = speed = "—"
        if "peak_mib" in ours and "peak_mib" in ref:
            memory = f"{ref['peak_mib'] / ours['peak_mib']:.2f}×"
            speed = f"{ref['s_per_step'] / ours['s_per_step']:.2f}×"
        cells = [
            row["n"],
            ours.get("peak_mib", ours.get("error", "—")),
            ref.get("peak_mib", ref.get("error", "—")),
            memory,
            ours.get("s_per_step", "—"),
            ref.get("s_per_step", "—"),
            speed,
            row["load"],
        ]
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    slope = result["growth_mib_per_adapter"]
    lines += ["", f"Growth per added adapter: ours {slope[OURS]} MiB, reference {slope[REF]} MiB."]
    return "\n".join(lines) + "\n"


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, nargs="+", default=[4, 16, 32])
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--timeout-s", type=float, default=TIMEOUT_S,
        help="a worker still running after this many seconds is killed and its row says so",
    )  # fmt: skip
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--shape", choices=list(SHAPES), default="llama")
    parser.add_argument("--out", type=Path, default=WORK / "llm-versus")
    parser.add_argument("--sides", nargs="+", choices=[OURS, REF], default=[OURS, REF])
    parser.add_argument(
        "--checkpointing", action="store_true",
        help="activation checkpointing on both sides (ours through the base's spec, the "
        "reference through its gradient_checkpointing_enable)",
    )  # fmt: skip
    parser.add_argument(
        "--autocast", action="store_true",
        help="ours under bf16 autocast on the CPU too (a run's `precision: bf16`), as the "
        "reference's step always runs",
    )  # fmt: skip
    parser.add_argument(
        "--malloc-trim", action="store_true",
        help="ours calls glibc's malloc_trim(0) between backward and the optimizer step "
        "(with --sides ours: the reference's worker has no such call)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    if args.malloc_trim and REF in args.sides:
        parser.error("--malloc-trim measures ours alone: add --sides ours")
    args.out.mkdir(parents=True, exist_ok=True)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    result = measure(args)
    (args.out / f"llm-versus-{args.device}.json").write_text(json.dumps(result, indent=1))
    print(markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
