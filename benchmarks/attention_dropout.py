"""What packed masks for the attention probabilities' dropout save a step (`adapters/attention.py`).

    python -m benchmarks.attention_dropout [--steps 10] [--out .bench/attention_dropout]

`AdapterModel` switches an encoder loaded with SDPA to `packed_attention`, which on a CPU in
training computes SDPA's math path with the packed masks of `PackedDropout` instead of SDPA's
`bernoulli_`. This runs the steps of `make bench` (random BERT-base and MiniLM shapes, one process
per configuration) with transformers' SDPA and with the packed attention: the seconds spent inside
the self-attention modules' forward per step (timed by hooks over 3 steps of each), then whole
steps alternating ABBA after two untimed steps of each, compared by their medians. Nothing is
asserted on these times; RESULTS.md ("Attention dropout from packed random bits") has the figures.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from torch import nn

from adapterfleet.adapters.attention import NAME
from benchmarks import common
from benchmarks.dropout import CASES
from benchmarks.run import WORK, make_base
from benchmarks.worker_ours import step_of


@contextmanager
def sdpa_attention(model: nn.Module) -> Iterator[None]:
    """transformers' own SDPA in place of `packed_attention` for every config of `model`."""
    configs = [m.config for m in model.modules() if hasattr(m, "config")]
    switched = [c for c in configs if getattr(c, "_attn_implementation", None) == NAME]
    for config in switched:
        config._attn_implementation = "sdpa"
    try:
        yield
    finally:
        for config in switched:
            config._attn_implementation = NAME


def seconds_in_attention(model: nn.Module, step: Callable[[], None], steps: int = 3) -> float:
    """Seconds per step spent in the forward of `model`'s self-attention modules (one warm step)."""
    spent = [0.0]
    started: list[float] = []
    modules = [m for m in model.modules() if type(m).__name__.endswith("SelfAttention")]
    hooks = [m.register_forward_pre_hook(lambda *_: started.append(time.perf_counter()))
             for m in modules]  # fmt: skip
    hooks += [m.register_forward_hook(lambda *_: spent.__setitem__(
        0, spent[0] + time.perf_counter() - started.pop())) for m in modules]  # fmt: skip
    step()
    spent[0] = 0.0
    for _ in range(steps):
        step()
    for hook in hooks:
        hook.remove()
    return spent[0] / steps


def time_case(shape: str, kind: str, n: int, batch: int, seq: int, steps: int, out: Path) -> dict:
    spec = {"base_dir": str(make_base(shape, out)), "kind": kind, "n": n, "batch": batch,
            "seq": seq, "device": "cpu", "autocast": None, "seed": 0, "lr": 1e-4}  # fmt: skip
    step, model, _ = step_of(spec)

    def sdpa_step() -> None:
        with sdpa_attention(model):
            step()

    with sdpa_attention(model):
        sdpa_in = seconds_in_attention(model, step)
    packed_in = seconds_in_attention(model, step)
    sdpa_s, packed_s = common.alternate(sdpa_step, step, steps)
    return {"shape": shape, "kind": kind, "n": n, "batch": [batch, seq],
            "sdpa_attention_s": sdpa_in, "packed_attention_s": packed_in,
            "sdpa_s": sdpa_s, "packed_s": packed_s, "saved": 1 - packed_s / sdpa_s}  # fmt: skip


def measure(
    steps: int = 10, out: Path = WORK / "attention_dropout", cases=CASES, seq: int = 128
) -> dict[str, Any]:
    return common.timed_cases(time_case, cases, steps, seq, out, "attention_dropout")


def markdown(result: dict[str, Any]) -> str:
    lines = [
        "| step | batch | in attention, SDPA s/step | in attention, packed s/step "
        "| step, SDPA s | step, packed s | saved |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in result["rows"]:
        lines.append(
            common.step_cells(row) + f" {row['sdpa_attention_s']:.3f} | "
            f"{row['packed_attention_s']:.3f} | {row['sdpa_s']:.3f} | {row['packed_s']:.3f} | "
            f"{row['saved']:.1%} |"
        )
    return "\n".join(lines) + f"\n\nLoad average before: {result['load_before']}.\n"


def main(argv: list[str] | None = None) -> int:
    return common.step_table_main(__doc__, measure, markdown, 10, WORK / "attention_dropout", argv)


if __name__ == "__main__":
    raise SystemExit(main())
