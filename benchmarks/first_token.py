"""What computing the last layer at the first token saves a step (`adapters/first_token.py`).

    python -m benchmarks.first_token [--steps 6] [--out .bench/first-token]

A head that pools the first token reads one row of the last layer, so `AdapterModel` runs that
layer after the attention's norm at the first token only. This times the steps of `make bench`
(random BERT-base and MiniLM shapes, one process per configuration) with the cut and with the
whole last layer (`every_position`, which the fusion-weight capture uses), alternating ABBA after
two untimed steps of each, and compares the medians. Nothing is asserted on these times;
RESULTS.md ("The last layer at the first token") has the figures.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from adapterfleet.adapters.first_token import every_position
from benchmarks import common
from benchmarks.run import WORK, make_base
from benchmarks.worker_ours import step_of

# (shape, kind, N, batch): the steps of make bench
CASES = (
    ("bert-base", "single_train", 1, 8),
    ("bert-base", "fusion_train", 16, 8),
    ("minilm", "single_train", 1, 32),
    ("minilm", "fusion_train", 16, 32),
    ("minilm", "fusion_infer", 16, 32),
)


def time_case(shape: str, kind: str, n: int, batch: int, seq: int, steps: int, out: Path) -> dict:
    """Median seconds per step with the whole last layer and with the cut, one process."""
    spec = {"base_dir": str(make_base(shape, out)), "kind": kind, "n": n, "batch": batch,
            "seq": seq, "device": "cpu", "autocast": None, "seed": 0, "lr": 1e-4}  # fmt: skip
    step, model, _ = step_of(spec)

    def whole_step() -> None:
        with every_position(model):
            step()

    whole, cut = common.alternate(whole_step, step, steps)
    return {"shape": shape, "kind": kind, "n": n, "batch": [batch, seq], "whole_s": whole,
            "cut_s": cut, "saved": 1 - cut / whole}  # fmt: skip


def measure(
    steps: int = 6, out: Path = WORK / "first-token", cases=CASES, seq: int = 128
) -> dict[str, Any]:
    return common.timed_cases(time_case, cases, steps, seq, out, "first-token")


def markdown(result: dict[str, Any]) -> str:
    return common.step_table(result, [
        ("whole last layer s/step", "whole_s", ".3f"),
        ("at the first token s/step", "cut_s", ".3f"),
        ("saved", "saved", ".1%"),
    ])  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    return common.step_table_main(__doc__, measure, markdown, 6, WORK / "first-token", argv)


if __name__ == "__main__":
    raise SystemExit(main())
