"""What drawing dropout masks from packed random bits saves a step (`adapters/dropout.py`).

    python -m benchmarks.dropout [--steps 10] [--out .bench/dropout]

`AdapterModel` replaces every `nn.Dropout` of its encoder (and its heads' and fusions') by a
`PackedDropout`, whose CPU masks come from four 15-bit draws per 64-bit random word instead of
torch's one generator call per element. This runs the steps of `make bench` (random BERT-base and
MiniLM shapes, one process per configuration) with torch's dropout and with the packed one: the
seconds spent inside the dropout modules' forward per step (timed by hooks over 3 steps of each),
then whole steps alternating ABBA after two untimed steps of each, compared by their medians.
Nothing is asserted on these times; RESULTS.md ("Dropout masks from packed random bits") has the
figures.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from torch import nn

from adapterfleet.adapters.dropout import PackedDropout
from benchmarks import common
from benchmarks.run import WORK, make_base
from benchmarks.worker_ours import step_of

# (shape, kind, N, batch): the steps of make bench
CASES = (
    ("minilm", "single_train", 1, 32),
    ("minilm", "fusion_train", 16, 32),
    ("bert-base", "single_train", 1, 8),
    ("bert-base", "fusion_train", 16, 8),
)


@contextmanager
def torch_dropout(model: nn.Module) -> Iterator[None]:
    """torch's own `nn.Dropout` in place of every `PackedDropout` of `model` (no state differs)."""
    packed = [m for m in model.modules() if type(m) is PackedDropout]
    for module in packed:
        module.__class__ = nn.Dropout
    try:
        yield
    finally:
        for module in packed:
            module.__class__ = PackedDropout


def time_case(shape: str, kind: str, n: int, batch: int, seq: int, steps: int, out: Path) -> dict:
    spec = {"base_dir": str(make_base(shape, out)), "kind": kind, "n": n, "batch": batch,
            "seq": seq, "device": "cpu", "autocast": None, "seed": 0, "lr": 1e-4}  # fmt: skip
    step, model, _ = step_of(spec)
    modules = [m for m in model.modules() if isinstance(m, nn.Dropout)]
    torch_in, packed_in, torch_s, packed_s = common.against_original(
        step, lambda: torch_dropout(model), modules, steps
    )
    return {"shape": shape, "kind": kind, "n": n, "batch": [batch, seq],
            "torch_dropout_s": torch_in, "packed_dropout_s": packed_in,
            "torch_s": torch_s, "packed_s": packed_s, "saved": 1 - packed_s / torch_s}  # fmt: skip


def measure(
    steps: int = 10, out: Path = WORK / "dropout", cases=CASES, seq: int = 128
) -> dict[str, Any]:
    return common.timed_cases(time_case, cases, steps, seq, out, "dropout")


def markdown(result: dict[str, Any]) -> str:
    return common.step_table(result, [
        ("in dropout, torch s/step", "torch_dropout_s", ".3f"),
        ("in dropout, packed s/step", "packed_dropout_s", ".3f"),
        ("step, torch dropout s", "torch_s", ".3f"),
        ("step, packed s", "packed_s", ".3f"),
        ("saved", "saved", ".1%"),
    ])  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    return common.step_table_main(__doc__, measure, markdown, 10, WORK / "dropout", argv)


if __name__ == "__main__":
    raise SystemExit(main())
