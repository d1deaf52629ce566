"""What giving freed heap memory back costs a training step: glibc's malloc_trim(0) once per step.

    python -m benchmarks.malloc_trim [--steps 8] [--out .bench/malloc-trim]

On a CPU, glibc keeps the blocks a step frees in its heap, so a process's peak RSS records the
heap's high-water mark; `malloc_trim(0)` between backward and the optimizer step returns the free
pages, and the next forward faults them in again. This runs the steps of `make bench` (ST-A on
MiniLM 32×128, fusion N=16 on MiniLM 32×128 and on BERT-base 8×128; random bases, one process
each): after two untimed steps, steps with and without the call alternate (ABBA), and the medians
are compared. What it saves is measured on the Llama shape by `python -m benchmarks.llm_versus
--sides ours --malloc-trim`. Nothing is asserted on these times; RESULTS.md ("Fusion on a Llama
shape") has the figures.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from benchmarks import common
from benchmarks.run import WORK, make_base
from benchmarks.worker_ours import step_of

# (shape, kind, N, batch): the steps of make bench
CASES = (
    ("minilm", "single_train", 1, 32),
    ("minilm", "fusion_train", 16, 32),
    ("bert-base", "fusion_train", 16, 8),
)


def time_case(shape: str, kind: str, n: int, batch: int, seq: int, steps: int, out: Path) -> dict:
    """Median seconds per step without and with the trim, in one process on one model."""
    spec = {"base_dir": str(make_base(shape, out)), "kind": kind, "n": n, "batch": batch,
            "seq": seq, "device": "cpu", "autocast": None, "seed": 0, "lr": 1e-4}  # fmt: skip
    step = step_of(spec)[0]

    def trimmed_step() -> None:
        spec["malloc_trim"] = True  # the step reads it at each call
        step()
        spec["malloc_trim"] = False

    plain, trimmed = common.alternate(step, trimmed_step, steps)
    return {"shape": shape, "kind": kind, "n": n, "batch": [batch, seq], "plain_s": plain,
            "trim_s": trimmed, "ratio": trimmed / plain}  # fmt: skip


def measure(
    steps: int = 8, out: Path = WORK / "malloc-trim", cases=CASES, seq: int = 128
) -> dict[str, Any]:
    out.mkdir(parents=True, exist_ok=True)
    rows = [time_case(*case, seq=seq, steps=steps, out=out) for case in cases]
    result = {"trim_available": common.malloc_trim(), "steps": steps, "rows": rows}
    (out / "malloc-trim.json").write_text(json.dumps(result, indent=1))
    return result


def markdown(result: dict[str, Any]) -> str:
    lines = [
        "| step | batch | s/step | s/step with malloc_trim | ratio |",
        "|---|---|---|---|---|",
    ]
    for row in result["rows"]:
        cells = f" {row['plain_s']:.3f} | {row['trim_s']:.3f} | {row['ratio']:.3f} |"
        lines.append(common.step_cells(row) + cells)
    if not result["trim_available"]:
        lines += ["", "This C library has no malloc_trim: both columns ran the same step."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    return common.step_table_main(__doc__, measure, markdown, 8, WORK / "malloc-trim", argv)


if __name__ == "__main__":
    raise SystemExit(main())
