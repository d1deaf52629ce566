"""Sequence packing against length-grouped padding for ST-A training on real RTE and MRPC.

    python -m benchmarks.packing [--examples 320] [--epochs 2] [--tasks rte mrpc]
        [--device cuda] [--batch 32] [--shape minilm|bert-base] [--tokens FILE]

Packing puts several short examples in one row of at most 128 tokens (first fit, longest
first) with a block-diagonal attention mask, so that no token attends across examples, and
positions that restart at 0 for each example (the way variable-length attention does it); each
example is pooled at its own first token. It is compared with what `train_single` does, batches
of `--batch` examples grouped by length and padded per batch (to a multiple of 8 on a GPU).
On a CUDA device a third form runs, varlen (`benchmarks/varlen.py`): each padded batch's
examples as one row without any padding, through variable-length FlashAttention; there every
form trains without attention-probability dropout, which varlen attention does not draw.
All train the same ST-A model (the packaged MiniLM, or a random BERT of `--shape`; one
pfeiffer adapter of rf 16 and a head; AdamW, lr 1e-4; bf16 autocast on a GPU), in one process,
on the task's first `--examples` training rows, alternating which goes first each epoch after
an untimed first one; a packed batch holds about `--batch` examples.

Reported per task: examples/s of each (median over epochs), the token positions each computes
per example (the packed rows' attention also spans whole rows), and a check that packing is
exact: the logits of the packed rows equal those of the examples one by one (eval mode).
Needs ../shared/data/glue (skipped, with the reason, without it), or `--tokens FILE` that
`--save-tokens FILE` wrote where it is (a GPU machine without the GLUE files).
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

from benchmarks import varlen

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


SHAPES = {  # random BERT shapes for a device without the packaged weights (--shape)
    "minilm": {"hidden_size": 384, "num_hidden_layers": 6, "num_attention_heads": 12,
               "intermediate_size": 1536},
    "bert-base": {"hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12,
                  "intermediate_size": 3072},
}  # fmt: skip


def st_a_model(
    seed: int, shape: str | None = None, attention_dropout: float | None = None
) -> tuple[Any, list[torch.nn.Parameter]]:
    """ST-A (pfeiffer rf 16 and a two-class head) on the packaged MiniLM, or on a random BERT
    of `shape`; `attention_dropout` overrides the base's attention-probability dropout."""
    from transformers import BertConfig, BertModel

    from adapterfleet.adapters import (
        AdapterConfig,
        AdapterModel,
        HeadConfig,
        add_adapter,
        train_adapter,
    )
    from adapterfleet.adapters.base_model import load_encoder

    torch.manual_seed(seed)
    override = (
        {} if attention_dropout is None else {"attention_probs_dropout_prob": attention_dropout}
    )
    if shape is None:
        encoder = load_encoder("minilm-l6", **override)
    else:
        encoder = BertModel(BertConfig(**SHAPES[shape], **override))
    model = AdapterModel(encoder)
    add_adapter(model, "task", AdapterConfig("pfeiffer", 16))
    model.add_head("task", HeadConfig(num_labels=2))
    return model, train_adapter(model, "task")


def exactness(split: Any, pad_id: int, variant: str = "packed", shape: str | None = None,
              device: str = "cpu") -> float:  # fmt: skip
    """max |`variant` − one by one| / max |one by one| of the logits of 16 examples, eval
    mode (under bf16 autocast on a GPU, both sides)."""
    from adapterfleet.data.batching import PadCollator

    model, _ = st_a_model(0, shape)
    model.to(device).eval()
    chosen = list(range(16))
    rows = pack([split.lengths[i] for i in chosen])
    rows = [[chosen[i] for i in row] for row in rows]
    order = [i for row in rows for i in row]
    if variant == "varlen":
        varlen.use_varlen(model.encoder_model)
        batch, logits_of = varlen.collate_varlen(split, order), varlen.varlen_logits
    else:
        batch, logits_of = collate_packed(split, rows, pad_id), packed_logits
    with torch.no_grad(), autocast_on(device):
        together = logits_of(model, on(batch, device))
        if variant == "varlen":
            model.encoder_model.set_attn_implementation("sdpa")
        alone = torch.cat([model(on(PadCollator(pad_id)([split[i]]), device)) for i in order])
    return float((together.float() - alone.float()).abs().max() / alone.float().abs().max())


def on(batch: dict[str, Any], device: str) -> dict[str, Any]:
    """`batch` with its tensors on `device` (training's own `to_device`)."""
    from adapterfleet.training.runtime import to_device

    return to_device(batch, torch.device(device))


def autocast_on(device: str) -> Any:
    """bf16 autocast on a GPU (as training there runs), nothing on a CPU."""
    from adapterfleet.training.runtime import autocast, autocast_dtype

    target = torch.device(device)
    return autocast(target, autocast_dtype("auto", target))


def epoch(model, optimizer, batches: list[dict[str, Any]], variant: str, device: str) -> float:  # noqa: ANN001
    """Examples per second over one pass of training steps."""
    logits_of = {"padded": lambda m, b: m(b), "packed": packed_logits,
                 "varlen": varlen.varlen_logits}[variant]  # fmt: skip
    model.train()
    seen, start = 0, time.perf_counter()
    for cpu_batch in batches:
        batch = on(cpu_batch, device)
        with autocast_on(device):
            logits = logits_of(model, batch)
        F.cross_entropy(logits.float(), batch["labels"]).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        seen += len(cpu_batch["labels"])
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    return seen / (time.perf_counter() - start)


def tokenized(task: str, examples: int) -> Any:
    """The first `examples` training rows of `task` (GLUE), tokenised by MiniLM's tokenizer."""
    from adapterfleet.adapters import load_tokenizer
    from adapterfleet.data import load_task, load_tasks_config, tokenize_task

    overrides = {f"tasks.{task}.max_train_examples": examples}
    spec = load_tasks_config(ROOT / "configs" / "glue.yaml", overrides)[task]
    work = ROOT / ".bench" / "packing"
    return tokenize_task(load_task(spec), load_tokenizer("minilm-l6"), CAPACITY, work).train


def save_tokens(tasks: list[str], examples: int, path: Path) -> None:
    """Token ids of each task's first `examples` training rows, for a machine without GLUE."""
    fields = ("input_ids", "token_type_ids", "labels", "lengths")
    splits = {task: tokenized(task, examples) for task in tasks}
    path.write_text(json.dumps({t: {f: getattr(s, f) for f in fields} for t, s in splits.items()}))


def load_tokens(path: Path, task: str) -> Any:
    from adapterfleet.data.cache import TokenizedSplit

    fields = json.loads(path.read_text())[task]
    return TokenizedSplit(task=task, split="train", path=path, key="", from_cache=True, **fields)


def variants(device: str) -> tuple[str, ...]:
    """Padded and packed everywhere; varlen where variable-length attention runs."""
    return ("padded", "packed") + (() if varlen.why_not(device) else ("varlen",))


def batches_of(variant: str, split: Any, rows: list[list[int]], grouped: list[list[int]],
               pad_id: int, e: int, per_batch: int, device: str) -> list[dict]:  # fmt: skip
    from adapterfleet.data.batching import PadCollator
    from adapterfleet.training.runtime import pad_multiple

    if variant == "padded":  # as training pads: to a multiple of 8 on a GPU
        collate = PadCollator(pad_id, pad_multiple(torch.device(device)), max(split.lengths))
        return [collate([split[i] for i in b]) for b in grouped]
    if variant == "varlen":  # the padded batches' examples, without the padding
        return [varlen.collate_varlen(split, b) for b in grouped]
    return [collate_packed(split, b, pad_id) for b in packed_batches(rows, per_batch, seed=e)]


def measure_task(task: str, examples: int, epochs: int, *, device: str = "cpu",
                 shape: str | None = None, batch: int = 32,
                 tokens: Path | None = None) -> dict[str, Any]:  # fmt: skip
    from adapterfleet.data.batching import LengthGroupedBatchSampler

    split = load_tokens(tokens, task) if tokens else tokenized(task, examples)
    split = split if len(split) <= examples else _first(split, examples)
    pad_id = 0  # MiniLM's [PAD]
    rows = pack(split.lengths)
    kinds = variants(device)
    # varlen attention draws no attention dropout: where it runs, no variant draws any
    no_attention_dropout = 0.0 if "varlen" in kinds else None
    result: dict[str, Any] = {"examples": len(split), "rows": len(rows), "device": device,
                              "batch": batch, "shape": shape or "minilm-l6",
                              "attention_dropout": no_attention_dropout,
                              "exactness": {k: exactness(split, pad_id, k, shape, device)
                                            for k in kinds if k != "padded"}}  # fmt: skip
    models = {k: st_a_model(0, shape, no_attention_dropout) for k in kinds}
    for model, _ in models.values():
        model.to(device)
    if "varlen" in models:
        varlen.use_varlen(models["varlen"][0].encoder_model)
    optimizers = {k: torch.optim.AdamW(p, lr=1e-4) for k, (_, p) in models.items()}
    positions, timed = {}, {k: [] for k in kinds}
    for e in range(epochs + 1):  # the first pass of each warms up, untimed
        grouped = LengthGroupedBatchSampler(split.lengths, batch, shuffle=True, seed=0, epoch=e)
        grouped = list(grouped.batches())
        made = {k: batches_of(k, split, rows, grouped, pad_id, e, batch, device) for k in kinds}
        positions = {k: sum(b["input_ids"].numel() for b in made[k]) for k in kinds}
        for kind in kinds if e % 2 == 0 else tuple(reversed(kinds)):
            model = models[kind][0]
            throughput = epoch(model, optimizers[kind], made[kind], kind, device)
            if e > 0:
                timed[kind].append(throughput)
    result.update(timed)
    result["positions_per_example"] = {k: v / len(split) for k, v in positions.items()}
    result["mean_length"] = sum(split.lengths) / len(split)
    padded = statistics.median(timed["padded"])
    result["speed-up"] = statistics.median(timed["packed"]) / padded
    if "varlen" in kinds:
        result["varlen speed-up"] = statistics.median(timed["varlen"]) / padded
    return result


def _first(split: Any, n: int) -> Any:
    from dataclasses import replace

    fields = ("input_ids", "token_type_ids", "labels", "lengths")
    return replace(split, **{f: getattr(split, f)[:n] for f in fields if getattr(split, f)})


def measure(
    tasks: list[str], examples: int = 320, epochs: int = 2, **options: Any
) -> dict[str, Any]:
    """Every task of `tasks` (options: device, shape, batch, tokens); writes
    .bench/packing/packing.json."""
    results = {task: measure_task(task, examples, epochs, **options) for task in tasks}
    out = ROOT / ".bench" / "packing" / "packing.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=1))
    return results


def markdown(results: dict[str, Any]) -> str:
    """The CPU table (padded against packed); where varlen ran, its columns too."""
    with_varlen = any("varlen" in r for r in results.values())
    head = ("| task | examples | length-grouped examples/s | packed examples/s | "
            "packed / grouped | token positions per example, grouped / packed (real) | "
            "packed rows | packed = one by one (max rel. diff of logits) |")  # fmt: skip
    if with_varlen:
        head += " varlen examples/s | varlen / grouped | varlen = one by one |"
    lines = [head, "|---" * head.count(" | ") + "|---|"]
    for task, r in results.items():
        padded, packed = statistics.median(r["padded"]), statistics.median(r["packed"])
        where, exact = r["positions_per_example"], r["exactness"]
        exact = exact if isinstance(exact, dict) else {"packed": exact}
        line = (f"| {task} | {r['examples']} | {padded:.1f} | {packed:.1f} | "
                f"{r['speed-up']:.2f}× | {where['padded']:.1f} / {where['packed']:.1f} "
                f"({r['mean_length']:.1f}) | "
                f"{r['rows']} | {exact['packed']:.1e} |")  # fmt: skip
        if with_varlen:
            line += (f" {statistics.median(r['varlen']):.1f} | {r['varlen speed-up']:.2f}× | "
                     f"{exact['varlen']:.1e} |")  # fmt: skip
        lines.append(line)
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=320)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--tasks", nargs="+", default=["rte", "mrpc"])
    parser.add_argument("--device", default="cpu", help="cuda: bf16 autocast, and varlen too")
    parser.add_argument("--batch", type=int, default=32, help="examples per training step")
    parser.add_argument(
        "--shape",
        choices=sorted(SHAPES),
        help="a random BERT of this shape instead of the packaged MiniLM",
    )
    parser.add_argument(
        "--tokens",
        type=Path,
        help="token ids written by --save-tokens, instead of ../shared/data/glue",
    )
    parser.add_argument("--save-tokens", type=Path,
                        help="write the tasks' token ids to this file and stop")  # fmt: skip
    args = parser.parse_args(argv)
    if args.tokens is None and not GLUE.is_dir():
        print(f"packing: skipped, {GLUE} is absent (the GLUE files this compares on)")
        return 0
    if args.save_tokens:
        save_tokens(args.tasks, args.examples, args.save_tokens)
        return 0
    if args.device == "cpu":
        torch.set_num_threads(2)
    options = {"device": args.device, "shape": args.shape, "batch": args.batch,
               "tokens": args.tokens}  # fmt: skip
    print(markdown(measure(args.tasks, args.examples, args.epochs, **options)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
