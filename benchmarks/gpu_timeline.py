"""Is a GPU training step bound by the host or by the device? The floor and the fusion step, timed
eagerly and replayed as CUDA graphs.

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
- **cuda_graphs ms**: the step as `fit` runs it with `training.cuda_graphs: true` (forward and
  backward replayed through `adapterfleet.training.graphs.StepGraphs`, the optimizer eager).

A host-bound step has enqueue ≈ wall and a small wait; `cuda_graphs ms` shows what fewer
launches win. Medians over `--steps` steps after 3 warm-up steps. Needs a CUDA device.
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


def _step(spec: dict) -> Any:
    """The worker's training step on the GPU (with `cuda_graphs` in the spec, as `fit` runs it
    with `training.cuda_graphs: true`)."""
    from benchmarks.worker_ours import step_of

    return step_of(spec)[0]


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


def product_graphs(spec: dict, steps: int) -> dict[str, Any]:
    """What `fit` does with `cuda_graphs: true` (the worker's step with `cuda_graphs`): forward
    and backward replayed through the project's `StepGraphs`, the optimizer step eager."""
    return split_times(_step({**spec, "cuda_graphs": True}), steps)


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
        step = _step(spec)
        row = {**split_times(step, steps), **device_time(step), "syncs": syncs(step)}
        try:
            row["cuda_graphs"] = product_graphs(spec, steps)
        except Exception as error:  # noqa: BLE001 - reported, the other figures stand
            row["cuda_graphs"] = {"error": f"{type(error).__name__}: {error}"[:300]}
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
