"""Fusion on one GPU, ours against the reference on the same GPU: the step of `make bench`, moved.

    python -m benchmarks.gpu_versus [--out .bench/gpu-versus] [--reps 30] [--only NAME ...]

Each configuration × side runs in a fresh process (the workers of `benchmarks/run.py`), both on
the same random BERT-base weights and the same seeded batch of 32×128, the step under bf16
autocast with float32 master weights (how adapterfleet trains on a GPU with `precision: auto`),
each timed step ending in `torch.cuda.synchronize()`. The floor is the frozen base alone: its
forward and a backward through every layer (what any fusion step must at least do). The
reference's python comes from ADAPTERFLEET_BENCH_REF_PYTHON, else the reference venv of
`benchmarks/refenv.py`. `make gpu-check` runs it as its `versus` step.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path
from typing import Any

from benchmarks import refenv
from benchmarks.run import OURS, REF, make_base, run_worker

ROOT = Path(__file__).resolve().parent.parent
BATCH, SEQ = 32, 128
CONFIGS: dict[str, tuple[str, str, dict[str, Any], tuple[str, ...]]] = {
    # name: (title, worker kind, spec, sides)
    "floor": ("frozen BERT-base forward + backward, no adapters (the floor)", "base_train",
              {"n": 1, "lr": 1e-4}, (OURS,)),
    "single-train": ("ST-A step, pfeiffer rf=16", "single_train", {"n": 1, "lr": 1e-4},
                     (OURS, REF)),
    "fusion-train-n16": ("fusion training step, N=16", "fusion_train", {"n": 16, "lr": 5e-5},
                         (OURS, REF)),
    "fusion-infer-n16": ("fusion inference, N=16", "fusion_infer", {"n": 16}, (OURS, REF)),
    # ours with training.cuda_graphs: true; speed-ups against the reference's eager row above
    "floor-graphs": ("the floor, replayed as CUDA graphs", "base_train",
                     {"n": 1, "lr": 1e-4, "cuda_graphs": True}, (OURS,)),
    "single-train-graphs": ("ST-A step, cuda_graphs: true", "single_train",
                            {"n": 1, "lr": 1e-4, "cuda_graphs": True}, (OURS,)),
    "fusion-train-n16-graphs": ("fusion training step, N=16, cuda_graphs: true", "fusion_train",
                                {"n": 16, "lr": 5e-5, "cuda_graphs": True}, (OURS,)),
    "fusion-infer-n16-graphs": ("fusion inference, N=16, replayed as CUDA graphs (predict)",
                                "fusion_infer", {"n": 16, "cuda_graphs": True}, (OURS,)),
}  # fmt: skip
GRAPHS = "-graphs"  # a configuration's twin with cuda_graphs, measured on our side only


def reference_python() -> str:
    return os.environ.get("ADAPTERFLEET_BENCH_REF_PYTHON") or str(refenv.ensure_ref_venv())


def measure(out: Path, reps: int = 30, only: list[str] | None = None) -> dict[str, Any]:
    """Every configuration on both sides; per side the median ms per step and the GPU peak."""
    pythons = {OURS: sys.executable, REF: reference_python()}
    base = make_base("bert-base", out)
    rows: dict[str, Any] = {}
    for index, (name, (title, kind, extra, sides)) in enumerate(CONFIGS.items()):
        if only and name not in only:
            continue
        spec = {"kind": kind, "base_dir": str(base), "batch": BATCH, "seq": SEQ, "seed": 0,
                "warmup": 5, "reps": reps, "budget_s": 60, "device": "cuda", "autocast": "bf16",
                **extra}  # fmt: skip
        order = sides if index % 2 == 0 else tuple(reversed(sides))
        row: dict[str, Any] = {"title": title}
        for side in order:
            result = run_worker(pythons[side], side, spec, out / name, threads=4)
            if "error" in result:
                row[side] = {"error": result["error"]}
                continue
            row[side] = {
                "ms": round(1000 * statistics.median(result["times"]), 2),
                "gpu_peak_mib": round(result["gpu_peak_mb"]),
                "versions": result["versions"],
            }
        rows[name] = row
    return {"rows": rows, "ratios": ratios(rows)}


def _ms(rows: dict[str, Any], name: str, side: str) -> float | None:
    return rows.get(name, {}).get(side, {}).get("ms")


def ratios(rows: dict[str, Any]) -> dict[str, float]:
    """Speed-ups (reference / ours) and memory ratios per configuration; fusion over the floor."""
    found: dict[str, float] = {}
    for name, row in rows.items():
        ours, ref = row.get(OURS, {}), row.get(REF, {})
        if name.endswith(GRAPHS):  # against the reference's eager step of the same configuration
            ref = rows.get(name.removesuffix(GRAPHS), {}).get(REF, {})
        if "ms" in ours and "ms" in ref:
            found[f"{name} speed-up"] = round(ref["ms"] / ours["ms"], 2)
            found[f"{name} memory ratio"] = round(ref["gpu_peak_mib"] / ours["gpu_peak_mib"], 2)
    floor = _ms(rows, "floor", OURS)
    for name in ("single-train", "fusion-train-n16"):
        for side in (OURS, REF):
            if floor and _ms(rows, name, side):
                found[f"{name} {side} / floor"] = round(_ms(rows, name, side) / floor, 2)
    graphed_floor, graphed = (
        _ms(rows, "floor" + GRAPHS, OURS),
        _ms(rows, "fusion-train-n16" + GRAPHS, OURS),
    )
    if graphed_floor and graphed:
        found[f"fusion-train-n16{GRAPHS} / floor{GRAPHS}"] = round(graphed / graphed_floor, 2)
    return found


def table(result: dict[str, Any]) -> str:
    lines = [
        "| configuration (BERT-base shape, 32×128, bf16 autocast) | ours ms/step | reference "
        "ms/step | speed-up | ours GPU peak MiB | reference GPU peak MiB | memory ratio |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, row in result["rows"].items():
        ours, ref = row.get(OURS, {}), row.get(REF, {})
        speed = result["ratios"].get(f"{name} speed-up")
        memory = result["ratios"].get(f"{name} memory ratio")
        cells = [
            row["title"],
            ours.get("ms", ours.get("error", "—")),
            ref.get("ms", ref.get("error", "—")),
            f"{speed}×" if speed else "—",
            ours.get("gpu_peak_mib", "—"),
            ref.get("gpu_peak_mib", "—"),
            f"{memory}×" if memory else "—",
        ]
        lines.append("| " + " | ".join(str(c) for c in cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / ".bench" / "gpu-versus")
    parser.add_argument("--reps", type=int, default=30)
    parser.add_argument("--only", nargs="+", choices=list(CONFIGS))
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    result = measure(args.out, args.reps, args.only)
    (args.out / "gpu-versus.json").write_text(json.dumps(result, indent=2))
    print(table(result))
    print(json.dumps(result["ratios"], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
