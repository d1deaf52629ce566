"""Whole training runs on one GPU, eager against `training.cuda_graphs: true`, as a run trains.

    python -m benchmarks.gpu_fit [--tokens FILE] [--shape bert-base] [--epochs 3] [--n 16]
                                 [--out .bench/gpu-fit]

What `gpu_versus` times on one fixed 32×128 batch, here on real lengths: ST-A with the project's
`train_single` and a fusion of N saved adapters with `train_fusion_run`, on RTE and MRPC token ids
(GLUE via MiniLM's tokenizer, or the file `--tokens` names, written by `benchmarks.packing`),
length-grouped shuffled batches of 32 padded to a multiple of 8 (`task_batches`), bf16 autocast,
a random base of `--shape` (its weights are not the point: the losses of both variants are). Per
variant and epoch: examples/s, the steps replayed, the mean training loss. The first epoch pays
one eager step and one capture per batch shape; later epochs replay. Needs a CUDA device.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import json
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.run import make_base

ROOT = Path(__file__).resolve().parent.parent
TASKS = ("rte", "mrpc")
DEV_ROWS = 256  # the last rows of the carried split are the dev split


def tokenized_task(task: str, tokens: Path | None) -> Any:
    """The task's token ids as a TokenizedTask: the last DEV_ROWS rows as its dev split."""
    from adapterfleet.data.cache import TokenizedTask
    from benchmarks import packing

    split = packing.load_tokens(tokens, task) if tokens else packing.tokenized(task, 2490)
    fields = ("input_ids", "token_type_ids", "labels", "lengths")
    cut = len(split) - DEV_ROWS

    def part(rows: slice, name: str) -> Any:
        return dataclasses.replace(
            split, split=name, **{f: getattr(split, f)[rows] for f in fields}
        )

    return TokenizedTask(task, ("0", "1"), False, 128, 0, part(slice(0, cut), "train"),
                         part(slice(cut, None), "dev"))  # fmt: skip


def saved_adapters(base: Path, n: int, out: Path) -> list[Path]:
    """N random pfeiffer rf 16 adapters of `base`, saved as a run saves them."""
    import torch

    from adapterfleet.adapters import AdapterConfig, AdapterModel, add_adapter, save_adapter
    from adapterfleet.adapters.base_model import load_encoder

    model = AdapterModel(load_encoder(str(base)))
    dirs = []
    for i in range(n):
        torch.manual_seed(i)
        add_adapter(model, f"a{i}", AdapterConfig("pfeiffer", 16))
        for name, param in model.named_parameters():
            if f".a{i}." in name:  # up-projections start at zero: make each adapter do something
                torch.nn.init.normal_(param, std=0.02)
        dirs.append(save_adapter(model, f"a{i}", out / f"adapter-{i}"))
    return dirs


def run(kind: str, task: Any, base: Path, adapters: list[Path], epochs: int, graphs: bool,
        out: Path, device: str = "cuda", precision: str = "bf16") -> dict[str, Any]:  # fmt: skip
    from adapterfleet.training import Callback, TrainConfig
    from adapterfleet.training.modes import train_fusion_run, train_single

    class Throughput(Callback):
        def __init__(self) -> None:
            self.per_epoch: list[float] = []

        def on_epoch_end(self, report: Any) -> None:
            self.per_epoch.append(round(report.examples_per_second, 1))

    config = TrainConfig(
        learning_rate=1e-4 if kind == "st-a" else 5e-5, max_epochs=epochs, batch_size=32,
        device=device, precision=precision, cuda_graphs=graphs, patience=epochs, seed=0,
    )  # fmt: skip
    throughput = Throughput()
    start = time.perf_counter()
    if kind == "st-a":
        result = train_single("st-a", task, str(base), config, out, callbacks=[throughput])
    else:
        result = train_fusion_run(task, str(base), adapters, config, out, callbacks=[throughput])
    history = result.fit.history
    return {
        "wall_s": round(time.perf_counter() - start, 2),
        "examples_per_s": throughput.per_epoch,
        "replays": [h.get("cuda_graph_replays") for h in history],
        "train_loss": [round(h["train_loss"], 5) for h in history],
        "dev_accuracy": result.dev_metrics.get("accuracy"),
    }


def measure(out: Path, tokens: Path | None, shape: str, epochs: int, n: int) -> dict[str, Any]:
    import torch

    out.mkdir(parents=True, exist_ok=True)
    base = make_base(shape, out)
    adapters = saved_adapters(base, n, out)
    rows: dict[str, Any] = {}
    for name in TASKS:
        task = tokenized_task(name, tokens)
        for kind in ("st-a", f"fusion-n{n}"):
            for graphs in (False, True):
                key = f"{name} {kind} {'cuda_graphs' if graphs else 'eager'}"
                gc.collect()  # the previous run's model, out of the next one's peak
                torch.cuda.empty_cache()
                torch.cuda.reset_peak_memory_stats()
                before = round(torch.cuda.memory_allocated() / 2**20)
                rows[key] = run(kind, task, base, adapters, epochs, graphs, out / "runs" / key)
                rows[key]["gpu_peak_mib"] = round(torch.cuda.max_memory_allocated() / 2**20)
                rows[key]["gpu_allocated_before_mib"] = before  # what earlier runs left
                print(key, json.dumps(rows[key]), flush=True)
    return {"device": torch.cuda.get_device_name(), "shape": shape, "epochs": epochs, "rows": rows}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=Path, help="token ids written by benchmarks.packing")
    parser.add_argument("--shape", default="bert-base")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--n", type=int, default=16)
    parser.add_argument("--out", type=Path, default=ROOT / ".bench" / "gpu-fit")
    args = parser.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print("gpu_fit: needs a CUDA device; nothing ran")
        return 0
    result = measure(args.out, args.tokens, args.shape, args.epochs, args.n)
    (args.out / "gpu_fit.json").write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
