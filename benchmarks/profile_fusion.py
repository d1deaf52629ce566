"""Where a fusion training step's time goes, against the floor: the frozen base's own step.

    python -m benchmarks.profile_fusion [--n 16] [--shape bert-base] [--batch 8] [--steps 3]
                                        [--device cpu|cuda] [--out .bench/profile]

Both steps run on the same random base (the shape of `benchmarks/run.py`) under the torch
profiler, after warm-up: the floor (no adapters: forward, and a backward through every layer to
the embeddings) and the fusion step of `make bench` (N adapters, fusion and head trainable, the V
regulariser, AdamW). Prints where the floor's own time goes (its largest operators: what no fusion
layer can remove, and what the reference pays too) and what the fusion step spends above the floor
per operator: the costs a faster fusion layer has to remove. On a GPU the step runs under bf16
autocast and the tables are by device time.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

from benchmarks import common
from benchmarks.run import SHAPES, make_base
from benchmarks.worker_ours import step_of

ROOT = Path(__file__).resolve().parent.parent


def profile(spec: dict, steps: int) -> dict[str, dict[str, float]]:
    """Per operator: self time (ms per step) and calls per step."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    step = common.synced(spec, step_of({"seed": 0, "lr": 1e-4, **spec})[0])
    for _ in range(2):
        step()
    cuda = spec["device"] == "cuda"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with torch_profiler_quiet(), torch_profile(activities=activities) as prof:
        for _ in range(steps):
            step()
    table: dict[str, dict[str, float]] = defaultdict(lambda: {"ms": 0.0, "calls": 0.0})
    for event in prof.key_averages():
        self_us = event.self_device_time_total if cuda else event.self_cpu_time_total
        if self_us <= 0:
            continue
        table[event.key]["ms"] += self_us / 1000 / steps
        table[event.key]["calls"] += event.count / steps
    return dict(table)


def torch_profiler_quiet() -> Any:
    import contextlib
    import warnings

    @contextlib.contextmanager
    def quiet():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield

    return quiet()


def above_floor(floor: dict, fusion: dict, top: int = 18) -> list[dict[str, Any]]:
    """Operators by what the fusion step spends on them beyond the floor, largest first."""
    names = set(floor) | set(fusion)
    rows = []
    for name in names:
        base, ours = floor.get(name, {"ms": 0, "calls": 0}), fusion.get(name, {"ms": 0, "calls": 0})
        rows.append(
            {
                "op": name,
                "floor_ms": round(base["ms"], 2),
                "fusion_ms": round(ours["ms"], 2),
                "extra_ms": round(ours["ms"] - base["ms"], 2),
                "floor_calls": round(base["calls"]),
                "fusion_calls": round(ours["calls"]),
            }
        )
    rows.sort(key=lambda r: -r["extra_ms"])
    return rows[:top]


def largest(table: dict[str, dict[str, float]], top: int = 6) -> list[dict[str, Any]]:
    """A step's largest operators by self time, with their share of the step."""
    total = sum(r["ms"] for r in table.values()) or 1.0
    rows = sorted(table.items(), key=lambda item: -item[1]["ms"])[:top]
    return [
        {
            "op": op,
            "ms": round(r["ms"], 2),
            "share": round(r["ms"] / total, 3),
            "calls": round(r["calls"]),
        }
        for op, r in rows
    ]


def markdown(result: dict[str, Any]) -> str:
    lines = [
        f"Step: floor {result['floor_ms']:.1f} ms, fusion {result['fusion_ms']:.1f} ms "
        f"({result['fusion_ms'] / result['floor_ms']:.2f}× the floor), by profiled self "
        f"{'device' if result['device'] == 'cuda' else 'CPU'} time per step.",
        "",
    ]
    if result.get("floor_largest"):
        parts = [
            f"`{r['op']}` {r['ms']} ms ({100 * r['share']:.0f} %, {r['calls']} calls)"
            for r in result["floor_largest"]
        ]
        lines += ["The floor's own largest operators: " + "; ".join(parts) + ".", ""]
    lines += [
        "| operator | floor ms | fusion ms | above the floor ms | calls floor → fusion |",
        "|---|---|---|---|---|",
    ]
    for row in result["above_floor"]:
        lines.append(
            f"| `{row['op']}` | {row['floor_ms']} | {row['fusion_ms']} | {row['extra_ms']} | "
            f"{row['floor_calls']} → {row['fusion_calls']} |"
        )
    return "\n".join(lines) + "\n"


def measure(
    shape: str = "bert-base", n: int = 16, batch: int = 8, seq: int = 128, steps: int = 3,
    device: str = "cpu", out: Path = ROOT / ".bench" / "profile",
) -> dict[str, Any]:  # fmt: skip
    """The floor and the fusion step profiled; writes OUT/profile-<device>.json."""
    out.mkdir(parents=True, exist_ok=True)
    base = make_base(shape, out)
    spec = {"base_dir": str(base), "batch": batch, "seq": seq, "device": device,
            "autocast": "bf16" if device == "cuda" else None}  # fmt: skip
    floor = profile({**spec, "kind": "base_train", "n": 1}, steps)
    fusion = profile({**spec, "kind": "fusion_train", "n": n}, steps)
    result = {
        "device": device,
        "shape": shape,
        "n": n,
        "batch": [batch, seq],
        "floor_ms": sum(r["ms"] for r in floor.values()),
        "fusion_ms": sum(r["ms"] for r in fusion.values()),
        "above_floor": above_floor(floor, fusion),
        "floor_largest": largest(floor),
    }
    (out / f"profile-{device}.json").write_text(json.dumps(result, indent=1))
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=16)
    parser.add_argument("--shape", choices=list(SHAPES), default="bert-base")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--out", type=Path, default=ROOT / ".bench" / "profile")
    args = parser.parse_args(argv)
    if args.device == "cpu":
        common.set_threads(2)
    result = measure(args.shape, args.n, args.batch, args.seq, args.steps, args.device, args.out)
    print(markdown(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
