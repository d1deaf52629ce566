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

import time
from collections.abc import Callable, Iterator
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


def seconds_in_dropout(model: nn.Module, step: Callable[[], None], steps: int = 3) -> float:
    """Seconds per step spent in the forward of `model`'s dropout modules (after one warm step)."""
    spent = [0.0]
    started: list[float] = []
    modules = [m for m in model.modules() if isinstance(m, nn.Dropout)]
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

    def torch_step() -> None:
        with torch_dropout(model):
            step()

    with torch_dropout(model):
        torch_in = seconds_in_dropout(model, step)
    packed_in = seconds_in_dropout(model, step)
    torch_s, packed_s = common.alternate(torch_step, step, steps)
    return {"shape": shape, "kind": kind, "n": n, "batch": [batch, seq],
            "torch_dropout_s": torch_in, "packed_dropout_s": packed_in,
            "torch_s": torch_s, "packed_s": packed_s, "saved": 1 - packed_s / torch_s}  # fmt: skip


def measure(
    steps: int = 10, out: Path = WORK / "dropout", cases=CASES, seq: int = 128
) -> dict[str, Any]:
    return common.timed_cases(time_case, cases, steps, seq, out, "dropout")


def markdown(result: dict[str, Any]) -> str:
    lines = [
        "| step | batch | in dropout, torch s/step | in dropout, packed s/step "
        "| step, torch dropout s | step, packed s | saved |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in result["rows"]:
        lines.append(
            common.step_cells(row) + f" {row['torch_dropout_s']:.3f} | "
            f"{row['packed_dropout_s']:.3f} | {row['torch_s']:.3f} | {row['packed_s']:.3f} | "
            f"{row['saved']:.1%} |"
        )
    return "\n".join(lines) + f"\n\nLoad average before: {result['load_before']}.\n"


def main(argv: list[str] | None = None) -> int:
    return common.step_table_main(__doc__, measure, markdown, 10, WORK / "dropout", argv)


if __name__ == "__main__":
    raise SystemExit(main())
