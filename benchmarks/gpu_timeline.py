"""Is a GPU training step bound by the host or by the device? The floor and the fusion step, timed
three ways.

    python -m benchmarks.gpu_timeline [--shape bert-base] [--batch 32] [--n 16] [--steps 20]
                                      [--out .bench/timeline]

For the floor (the frozen base's forward and backward) and the fusion step of `make bench`
(`benchmarks/worker_ours.step_of`: N adapters, fusion and head trainable, the V regulariser,
the project's AdamW, fused on a GPU), both under bf16 autocast:

- **enqueue ms**: the Python call of one step without waiting for the GPU: the host's time to
  launch its kernels, and any wait the step itself makes for the device;
- **wait ms**: the synchronize after it, the device's work still queued when the host is done;
- **device ms**, kernels per step: by the profiler;
- **syncs**: the points inside a step where the host waited for the device
  (`torch.cuda.set_sync_debug_mode`), each with the line of code that made it;
- **graph ms**: the whole step, optimizer included (a capturable fused AdamW), captured once as
  one CUDA graph and replayed, the attention mask (all ones) left out so that no mask check
  syncs; or the reason it could not be captured (on an H200 slower than the next, not pursued);
- **cuda_graphs ms**: the step as `fit` runs it with `training.cuda_graphs: true` (forward and
  backward replayed through `adapterfleet.training.graphs.StepGraphs`, the optimizer eager).

A host-bound step has enqueue ≈ wall and a small wait; the graph rows show what fewer launches
win. Medians over `--steps` steps after 3 warm-up steps. Needs a CUDA device.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import traceback
import warnings
from collections import Counter
from pathlib import Path
from typing import Any

from benchmarks.run import SHAPES, make_base

ROOT = Path(__file__).resolve().parent.parent


def _step_parts(spec: dict) -> tuple[Any, Any, list, dict]:
    """The worker's step, its model, trainable parameters and batch (on the GPU)."""
    from benchmarks import worker_ours

    captured: dict[str, Any] = {}
    place = worker_ours.common.place

    def keep(spec: dict, model, batch: dict):
        model, batch = place(spec, model, batch)
        captured["batch"] = batch
        return model, batch

    worker_ours.common.place = keep
    try:
        step, model, params = worker_ours.step_of(spec)
    finally:
        worker_ours.common.place = place
    return step, model, params, captured["batch"]


def split_times(step: Any, steps: int) -> dict[str, float]:
    import torch

    enqueue, wait = [], []
    for index in range(3 + steps):
        start = time.perf_counter()
        step()
        launched = time.perf_counter()
        torch.cuda.synchronize()
        if index >= 3:
            enqueue.append(launched - start)
            wait.append(time.perf_counter() - launched)
    walls = [a + b for a, b in zip(enqueue, wait, strict=True)]
    return {
        "wall_ms": round(1000 * statistics.median(walls), 2),
        "enqueue_ms": round(1000 * statistics.median(enqueue), 2),
        "wait_ms": round(1000 * statistics.median(wait), 2),
    }


def device_time(step: Any, steps: int = 3) -> dict[str, float]:
    """Kernel time and kernel count per step, by the profiler."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(steps):
                step()
            torch.cuda.synchronize()
    kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    launches = [e for e in prof.events() if "LaunchKernel" in e.name]
    return {
        "device_ms": round(sum(e.device_time for e in kernels) / 1000 / steps, 2),
        "kernels": round(len(kernels) / steps),
        "launches": round(len(launches) / steps),
    }


def syncs(step: Any) -> list[str]:
    """Where one step waits for the device: one line per sync, the code that made it."""
    import torch

    found: list[str] = []

    def record(message, category, filename, lineno, file=None, line=None) -> None:
        frames = [f for f in traceback.extract_stack()[:-2] if "/torch/" not in f.filename]
        where = frames[-1] if frames else None
        place = f"{Path(where.filename).name}:{where.lineno} {where.name}" if where else "?"
        found.append(f"{str(message).splitlines()[0][:80]} at {place}")

    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = record  # catch_warnings puts the original back
        torch.cuda.set_sync_debug_mode("warn")
        try:
            step()
        finally:
            torch.cuda.set_sync_debug_mode("default")
    return [f"{count}× {line}" for line, count in Counter(found).items()]


def graphed(spec: dict, steps: int) -> dict[str, Any]:
    """The step as one CUDA graph: forward, loss, backward and a capturable AdamW."""
    import torch
    from torch.nn import functional as F

    from adapterfleet.fusion import fusion_regularization_loss
    from benchmarks.names import FUSION_NAME

    _, model, params, batch = _step_parts(spec)
    inputs = {k: v for k, v in batch.items() if k != "attention_mask"}
    fused = spec["kind"] == "fusion_train"
    optimizer = torch.optim.AdamW(
        params, lr=spec["lr"], weight_decay=0.01, fused=True, capturable=True
    )

    def body() -> torch.Tensor:
        with torch.autocast("cuda", dtype=torch.bfloat16, cache_enabled=False):
            logits = model(inputs)
        loss = F.cross_entropy(logits.float(), batch["labels"])
        if fused:
            loss = loss + fusion_regularization_loss(model, FUSION_NAME)
        loss.backward()
        optimizer.step()
        return loss

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            optimizer.zero_grad(set_to_none=True)
            body()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    optimizer.zero_grad(set_to_none=True)
    try:
        with torch.cuda.graph(graph):
            body()
    except Exception as error:  # noqa: BLE001 - the reason is the result
        return {"error": f"{type(error).__name__}: {str(error).splitlines()[0][:200]}"}
    return split_times(graph.replay, steps)


def product_graphs(spec: dict, steps: int) -> dict[str, Any]:
    """What `fit` does with `cuda_graphs: true` (the worker's step with `cuda_graphs`): forward
    and backward replayed through the project's `StepGraphs`, the optimizer step eager."""
    return split_times(_step_parts({**spec, "cuda_graphs": True})[0], steps)


def measure(shape: str, n: int, batch: int, steps: int, out: Path) -> dict[str, Any]:
    import torch

    out.mkdir(parents=True, exist_ok=True)
    base = make_base(shape, out)
    common = {"base_dir": str(base), "batch": batch, "seq": 128, "device": "cuda",
              "autocast": "bf16", "seed": 0, "lr": 5e-5}  # fmt: skip
    result: dict[str, Any] = {"device": torch.cuda.get_device_name(), "shape": shape,
                              "batch": [batch, 128], "n": n}  # fmt: skip
    for name, kind in (("floor", "base_train"), ("fusion", "fusion_train")):
        spec = {**common, "kind": kind, "n": n if kind == "fusion_train" else 1}
        step = _step_parts(spec)[0]
        row = {**split_times(step, steps), **device_time(step), "syncs": syncs(step)}
        for variant, run in (("graph", graphed), ("cuda_graphs", product_graphs)):
            try:
                row[variant] = run(spec, steps)
            except Exception as error:  # noqa: BLE001 - reported, the other figures stand
                row[variant] = {"error": f"{type(error).__name__}: {error}"[:300]}
        result[name] = row
        print(name, json.dumps(row), flush=True)
        torch.cuda.empty_cache()
    (out / "timeline.json").write_text(json.dumps(result, indent=1))
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", choices=list(SHAPES), default="bert-base")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--n", type=int, default=16)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--out", type=Path, default=ROOT / ".bench" / "timeline")
    args = parser.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print("gpu_timeline needs a CUDA device", file=sys.stderr)
        return 2
    measure(args.shape, args.n, args.batch, args.steps, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
