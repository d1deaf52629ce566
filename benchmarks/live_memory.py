"""What a training step keeps per token, the allocator aside: live tensor bytes on the CPU.

    python -m benchmarks.live_memory [--shape llama|tiny] [--n 16] [--batch 1] [--seq 128 512]
                                     [--sides ours reference] [--autocast] [--checkpointing]
                                     [--out DIR]

A CPU process's peak RSS also holds what glibc's heap keeps after tensors are freed (RESULTS.md,
"Fusion on a Llama shape"), which blurs how a step's memory grows with its tokens. This takes, from
the torch profiler's memory events, the highest sum of tensor bytes allocated and not yet freed
during one training step (forward, loss, backward; the weights and the batch,
made before it, are not counted; an operator's own temporaries are netted within it). It measures
the frozen base alone (the floor: its forward and a backward through every layer, what any fusion
step must at least do), ours' fusion step of N adapters and the reference's (in its own venv,
`benchmarks/refenv.py`, one process per length), on the random Llama shape of
`benchmarks/llm_memory.py` loaded in bfloat16, at each sequence length given. The reference's step
runs under bf16 autocast (its float32 adapters take no bfloat16 hidden states otherwise); ours and
the floor in the precision `precision: auto` picks on a CPU (float32 for what the fusion adds), or
with `--autocast` under bf16 autocast as on a GPU. From the first and last lengths it gives the MiB
per token of each: what a fusion adds per token beyond the base's own backward. Writes
DIR/live-memory.json and prints a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks import common
from benchmarks.llm_memory import SHAPES, WORK, make_llama_base
from benchmarks.run import OURS, REF, ROOT, _env

STEPS = {
    ("base_train", OURS): "the frozen base alone (the floor)",
    ("fusion_train", OURS): "ours' fusion step",
    ("fusion_train", REF): "the reference's fusion step",
}


def ours_step(spec: dict[str, Any]) -> Callable[[], None]:
    import torch
    from torch.nn import functional as F

    from adapterfleet.fusion import fusion_regularization_loss
    from benchmarks.worker_ours import FUSION_NAME, _with_adapters

    torch.manual_seed(spec["seed"])
    model, _ = _with_adapters(spec)
    model.train()
    batch = common.random_batch(spec["seed"], spec["batch"], spec["seq"], model.config.vocab_size)

    def step() -> None:
        with common.autocast(spec):
            logits = model(batch)
        loss = F.cross_entropy(logits.float(), batch["labels"])
        if spec["kind"] == "fusion_train":
            loss = loss + fusion_regularization_loss(model, FUSION_NAME)
        loss.backward()

    return step


def reference_step(spec: dict[str, Any]) -> Callable[[], None]:
    """The reference's step as `benchmarks/worker_ref.py` times it, the optimizer aside."""
    import torch
    from torch.nn import functional as F

    from benchmarks.worker_ref import _batch_kwargs, _with_adapters

    torch.manual_seed(spec["seed"])
    model, _ = _with_adapters(spec)
    model.train()
    batch = common.random_batch(spec["seed"], spec["batch"], spec["seq"], model.config.vocab_size)
    kwargs = _batch_kwargs(batch, model)

    def step() -> None:
        with common.autocast(spec):
            logits = model(**kwargs).logits
        loss = F.cross_entropy(logits.float(), batch["labels"])
        loss = loss + model.base_model.get_fusion_regularization_loss()
        loss.backward()

    return step


def peak_live_mib(spec: dict[str, Any], side: str = OURS) -> float:
    """The peak of live tensor MiB during one training step of the spec's model."""
    from torch.profiler import ProfilerActivity, profile

    step = ours_step(spec) if side == OURS else reference_step(spec)
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        step()
    events = sorted(
        (e for e in prof.events() if e.self_cpu_memory_usage), key=lambda e: e.time_range.start
    )
    live = peak = 0
    for event in events:
        live += event.self_cpu_memory_usage
        peak = max(peak, live)
    return peak / 2**20


def in_reference_venv(spec: dict[str, Any]) -> float:
    """`peak_live_mib` of the reference's step, in a process of the reference's python."""
    from benchmarks.gpu_versus import reference_python

    command = [reference_python(), "-m", "benchmarks.live_memory", "--worker", json.dumps(spec)]
    out = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False,
                         env=_env(threads=2, side=REF))  # fmt: skip
    if out.returncode != 0:
        raise RuntimeError(f"the reference's worker: {out.stderr.strip()[-1500:]}")
    return float(json.loads(out.stdout.strip().splitlines()[-1])["peak_live_mib"])


def measure(args: argparse.Namespace, base: Path) -> dict[str, Any]:
    rows = []
    for kind, side in STEPS:
        if side not in args.sides:
            continue
        for seq in args.seq:
            spec = {"kind": kind, "n": args.n, "lr": 5e-5, "base_dir": str(base),
                    "base_dtype": "bfloat16", "checkpointing": args.checkpointing,
                    "pooling": "last", "batch": args.batch, "seq": seq, "seed": 0,
                    "device": "cpu"}  # fmt: skip
            if side == REF or args.autocast:  # ours as on a GPU under `precision: auto`
                spec["autocast"] = "bf16"
            mib = peak_live_mib(spec) if side == OURS else in_reference_venv(spec)
            rows.append({"kind": kind, "side": side, "tokens": args.batch * seq,
                         "peak_live_mib": round(mib, 3)})  # fmt: skip
            print(f"  {side} {kind} {args.batch}×{seq}: {mib:.0f} MiB", flush=True)
    return {"shape": args.shape, "n": args.n, "checkpointing": args.checkpointing,
            "ours_autocast": args.autocast, "rows": rows,
            "mib_per_token": per_token(rows)}  # fmt: skip


def per_token(rows: list[dict[str, Any]]) -> dict[str, float | None]:
    """Each step's growth in MiB per token, from its fewest to its most tokens."""
    slopes: dict[str, float | None] = {}
    for kind, side in STEPS:
        mine = sorted((r for r in rows if (r["kind"], r["side"]) == (kind, side)),
                      key=lambda r: r["tokens"])  # fmt: skip
        if not mine:
            continue
        first, last = mine[0], mine[-1]
        spread = last["tokens"] - first["tokens"]
        slope = (last["peak_live_mib"] - first["peak_live_mib"]) / spread if spread else None
        slopes[f"{side} {kind}"] = round(slope, 3) if slope is not None else None
    return slopes


def table(result: dict[str, Any]) -> str:
    lines = ["| step | tokens a step | peak live tensor MiB |", "|---|---|---|"]
    for row in result["rows"]:
        title = STEPS[row["kind"], row["side"]]
        lines.append(f"| {title} | {row['tokens']} | {row['peak_live_mib']:,.0f} |")
    slopes = [f"{STEPS[tuple(key.split()[::-1])]} {value}"  # type: ignore[index]
              for key, value in result["mib_per_token"].items()]  # fmt: skip
    return "\n".join([*lines, "", "MiB per token: " + ", ".join(slopes)])


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", choices=list(SHAPES), default="llama")
    parser.add_argument("--n", type=int, default=16)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--seq", type=int, nargs="+", default=[128, 512])
    parser.add_argument("--sides", nargs="+", choices=[OURS, REF], default=[OURS, REF])
    parser.add_argument("--checkpointing", action="store_true")
    parser.add_argument(
        "--autocast", action="store_true", help="ours and the floor under bf16 autocast too"
    )
    parser.add_argument("--out", type=Path, default=WORK / "live-memory")
    parser.add_argument("--worker", help=argparse.SUPPRESS)  # a spec: the reference's process
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args.worker:
        print(json.dumps({"peak_live_mib": peak_live_mib(json.loads(args.worker), REF)}))
        return 0
    base = make_llama_base(SHAPES[args.shape], WORK / f"base-llama-{args.shape}")
    result = measure(args, base)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "live-memory.json").write_text(json.dumps(result, indent=1))
    print(table(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
