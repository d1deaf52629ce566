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

from collections.abc import Iterator
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


def time_case(shape: str, kind: str, n: int, batch: int, seq: int, steps: int, out: Path) -> dict:
    spec = {"base_dir": str(make_base(shape, out)), "kind": kind, "n": n, "batch": batch,
            "seq": seq, "device": "cpu", "autocast": None, "seed": 0, "lr": 1e-4}  # fmt: skip
    step, model, _ = step_of(spec)
    modules = [m for m in model.modules() if type(m).__name__.endswith("SelfAttention")]
    sdpa_in, packed_in, sdpa_s, packed_s = common.against_original(
        step, lambda: sdpa_attention(model), modules, steps
    )
    return {"shape": shape, "kind": kind, "n": n, "batch": [batch, seq],
            "sdpa_attention_s": sdpa_in, "packed_attention_s": packed_in,
            "sdpa_s": sdpa_s, "packed_s": packed_s, "saved": 1 - packed_s / sdpa_s}  # fmt: skip


def measure(
    steps: int = 10, out: Path = WORK / "attention_dropout", cases=CASES, seq: int = 128
) -> dict[str, Any]:
    return common.timed_cases(time_case, cases, steps, seq, out, "attention_dropout")


def markdown(result: dict[str, Any]) -> str:
    return common.step_table(result, [
        ("in attention, SDPA s/step", "sdpa_attention_s", ".3f"),
        ("in attention, packed s/step", "packed_attention_s", ".3f"),
        ("step, SDPA s", "sdpa_s", ".3f"),
        ("step, packed s", "packed_s", ".3f"),
        ("saved", "saved", ".1%"),
    ])  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    return common.step_table_main(__doc__, measure, markdown, 10, WORK / "attention_dropout", argv)


if __name__ == "__main__":
    raise SystemExit(main())
