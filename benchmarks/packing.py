"""Sequence packing against length-grouped padding for ST-A training on real RTE and MRPC.

    python -m benchmarks.packing [--examples 320] [--epochs 2] [--tasks rte mrpc]

Packing puts several short examples in one row of at most 128 tokens (first fit, longest
first) with a block-diagonal attention mask, so that no token attends across examples, and
positions that restart at 0 for each example (the way variable-length attention does it); each
example is pooled at its own first token. It is compared with what `train_single` does, batches
of 32 examples grouped by length and padded per batch. Both train the same ST-A model (the
packaged MiniLM, one pfeiffer adapter of rf 16 and a head; AdamW, lr 1e-4), in one process, on
the task's first `--examples` training rows, alternating which goes first each epoch after
an untimed first one; a packed batch holds about 32 examples.

Reported per task: examples/s of each (median over epochs), the token positions each computes
per example (the packed rows' attention also spans whole rows), and a check that packing is
exact: the logits of the packed rows equal those of the examples one by one (eval mode).
Needs ../shared/data/glue (skipped, with the reason, without it).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch
from torch.nn import functional as F

ROOT = Path(__file__).resolve().parent.parent
GLUE = ROOT.parent / "shared" / "data" / "glue"
CAPACITY = 128


def pack(lengths: list[int], capacity: int = CAPACITY) -> list[list[int]]:
    """Example indices in rows of at most `capacity` tokens: first fit, longest first."""
    rows: list[list[int]] = []
    room: list[int] = []
    for index in sorted(range(len(lengths)), key=lambda i: -lengths[i]):
        for r, free in enumerate(room):
            if lengths[index] <= free:
                rows[r].append(index)
                room[r] -= lengths[index]
                break
        else:
            rows.append([index])
            room.append(capacity - lengths[index])
    return rows


def packed_batches(rows: list[list[int]], per_batch: int, seed: int) -> list[list[list[int]]]:
    """Rows in a seeded order, grouped until a batch holds `per_batch` examples or more."""
    order = torch.randperm(len(rows), generator=torch.Generator().manual_seed(seed)).tolist()
    batches, current, count = [], [], 0
    for r in order:
        current.append(rows[r])
        count += len(rows[r])
        if count >= per_batch:
            batches.append(current)
            current, count = [], 0
    return batches + ([current] if current else [])


def collate_packed(split: Any, rows: list[list[int]], pad_id: int) -> dict[str, torch.Tensor]:
    """Token ids, token types, restarting positions, the block-diagonal mask (rows, 1, L, L)
    and where each example starts, for `rows` of example indices of `split`."""
    width = max(sum(split.lengths[i] for i in row) for row in rows)
    shape = (len(rows), width)
    ids = torch.full(shape, pad_id, dtype=torch.long)
    types, positions = torch.zeros(shape, dtype=torch.long), torch.zeros(shape, dtype=torch.long)
    mask = torch.eye(width, dtype=torch.bool).repeat(len(rows), 1, 1, 1)  # pads see themselves
    starts, labels = [], []
    for r, row in enumerate(rows):
        at = 0
        for i in row:
            n = split.lengths[i]
            ids[r, at : at + n] = torch.tensor(split.input_ids[i])
            if split.token_type_ids is not None:
                types[r, at : at + n] = torch.tensor(split.token_type_ids[i])
            positions[r, at : at + n] = torch.arange(n)
            mask[r, 0, at : at + n, at : at + n] = True
            starts.append((r, at))
            labels.append(split.labels[i])
            at += n
    where = torch.tensor(starts)
    return {"input_ids": ids, "token_type_ids": types, "position_ids": positions,
            "attention_mask": mask, "rows": where[:, 0], "starts": where[:, 1],
            "labels": torch.tensor(labels)}  # fmt: skip


def packed_logits(model: Any, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    hidden = model.encoder_model(
        input_ids=batch["input_ids"],
        token_type_ids=batch["token_type_ids"],
        position_ids=batch["position_ids"],
        attention_mask=batch["attention_mask"],
    ).last_hidden_state
    return model.heads[model.active_head](hidden[batch["rows"], batch["starts"]])


def st_a_model(seed: int) -> tuple[Any, list[torch.nn.Parameter]]:
    from adapterfleet.adapters import (
        AdapterConfig,
        AdapterModel,
        HeadConfig,
        add_adapter,
        train_adapter,
    )
    from adapterfleet.adapters.base_model import load_encoder

    torch.manual_seed(seed)
    model = AdapterModel(load_encoder("minilm-l6"))
    add_adapter(model, "task", AdapterConfig("pfeiffer", 16))
    model.add_head("task", HeadConfig(num_labels=2))
    return model, train_adapter(model, "task")


def exactness(split: Any, pad_id: int) -> float:
    """max |packed − one by one| / max |one by one| of the logits of 16 examples, eval mode."""
    from adapterfleet.data.batching import PadCollator

    model, _ = st_a_model(0)
    model.eval()
    chosen = list(range(16))
    rows = pack([split.lengths[i] for i in chosen])
    rows = [[chosen[i] for i in row] for row in rows]
    with torch.no_grad():
        batch = collate_packed(split, rows, pad_id)
        packed = packed_logits(model, batch)
        alone = torch.cat([model(PadCollator(pad_id)([split[i]])) for row in rows for i in row])
    return float((packed - alone).abs().max() / alone.abs().max())


def epoch(model, optimizer, batches: list[dict[str, torch.Tensor]], packed: bool) -> float:  # noqa: ANN001
    """Examples per second over one pass of training steps."""
    model.train()
    seen, start = 0, time.perf_counter()
    for batch in batches:
        logits = packed_logits(model, batch) if packed else model(batch)
        F.cross_entropy(logits, batch["labels"]).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        seen += len(batch["labels"])
    return seen / (time.perf_counter() - start)


def measure_task(task: str, examples: int, epochs: int) -> dict[str, Any]:
    from adapterfleet.adapters import load_tokenizer
    from adapterfleet.data import load_task, load_tasks_config, tokenize_task
    from adapterfleet.data.batching import LengthGroupedBatchSampler, PadCollator

    overrides = {f"tasks.{task}.max_train_examples": examples}
    spec = load_tasks_config(ROOT / "configs" / "glue.yaml", overrides)[task]
    tokenizer = load_tokenizer("minilm-l6")
    work = ROOT / ".bench" / "packing"
    split = tokenize_task(load_task(spec), tokenizer, CAPACITY, work).train
    pad_id = int(tokenizer.pad_token_id)
    rows = pack(split.lengths)
    result: dict[str, Any] = {"examples": len(split), "rows": len(rows), "padded": [],
                              "packed": [], "exactness": exactness(split, pad_id)}  # fmt: skip
    models = {kind: st_a_model(0) for kind in ("padded", "packed")}
    optimizers = {k: torch.optim.AdamW(p, lr=1e-4) for k, (_, p) in models.items()}
    positions = {"padded": 0, "packed": 0}
    for e in range(epochs + 1):  # the first pass of each warms up, untimed
        grouped = LengthGroupedBatchSampler(split.lengths, 32, shuffle=True, seed=0, epoch=e)
        padded = [PadCollator(pad_id)([split[i] for i in b]) for b in grouped.batches()]
        packed = [collate_packed(split, b, pad_id) for b in packed_batches(rows, 32, seed=e)]
        positions = {"padded": sum(b["input_ids"].numel() for b in padded),
                     "packed": sum(b["input_ids"].numel() for b in packed)}  # fmt: skip
        for kind in ("padded", "packed") if e % 2 == 0 else ("packed", "padded"):
            batches = padded if kind == "padded" else packed
            model = models[kind][0]
            throughput = epoch(model, optimizers[kind], batches, kind == "packed")
            if e > 0:
                result[kind].append(throughput)
    result["positions_per_example"] = {k: v / len(split) for k, v in positions.items()}
    result["mean_length"] = sum(split.lengths) / len(split)
    result["speed-up"] = statistics.median(result["packed"]) / statistics.median(result["padded"])
    return result


def measure(tasks: list[str], examples: int = 320, epochs: int = 2) -> dict[str, Any]:
    """Every task of `tasks`; writes .bench/packing/packing.json."""
    results = {task: measure_task(task, examples, epochs) for task in tasks}
    out = ROOT / ".bench" / "packing" / "packing.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=1))
    return results


def markdown(results: dict[str, Any]) -> str:
    lines = [
        "| task | examples | length-grouped examples/s | packed examples/s | packed / grouped | "
        "token positions per example, grouped / packed (real) | packed rows | packed = one by "
        "one (max rel. diff of logits) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for task, r in results.items():
        padded, packed = statistics.median(r["padded"]), statistics.median(r["packed"])
        where = r["positions_per_example"]
        lines.append(
            f"| {task} | {r['examples']} | {padded:.1f} | {packed:.1f} | {r['speed-up']:.2f}× | "
            f"{where['padded']:.1f} / {where['packed']:.1f} ({r['mean_length']:.1f}) | "
            f"{r['rows']} | {r['exactness']:.1e} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=320)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--tasks", nargs="+", default=["rte", "mrpc"])
    args = parser.parse_args(argv)
    if not GLUE.is_dir():
        print(f"packing: skipped, {GLUE} is absent (the GLUE files this compares on)")
        return 0
    torch.set_num_threads(2)
    print(markdown(measure(args.tasks, args.examples, args.epochs)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
