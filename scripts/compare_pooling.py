"""Mean against first-token pooling on the packaged MiniLM: ST-A and head-only on RTE and MRPC.

    python scripts/compare_pooling.py --out runs/pooling [--tasks mrpc rte] [--modes st-a head]
        [--seeds 0 1 2] [--epochs 3] [--jobs 2]

Runs `adapterfleet train -c configs/glue.yaml` once per task × mode × pooling × seed (one CPU
thread each, `--jobs` at a time), skips runs whose run.json exists (so it resumes), and prints a
Markdown table of the dev accuracy (mean ± std over the seeds), one row per task × mode asked for.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODES = {"st-a": ["--mode", "st-a", "--reduction-factor", "16"], "head": ["--mode", "head"]}


def command(out: Path, task: str, mode: str, pooling: str, seed: int, epochs: int) -> list[str]:
    return [
        sys.executable, "-m", "adapterfleet.cli.app", "train", "-c", "configs/glue.yaml",
        "--task", task, *MODES[mode], "--lr", "1e-3", "--epochs", str(epochs),
        "--seed", str(seed), "--out", str(out / f"{task}-{mode}-{pooling}-s{seed}"),
        "-o", f"tasks.{task}.pooling={pooling}", "-o", "adapters.training.warmup_ratio=0.1",
        "-o", "adapters.training.patience=null", "-o", f"storage={out / 'storage'}",
    ]  # fmt: skip


def run(cmd: list[str]) -> None:
    done = Path(cmd[cmd.index("--out") + 1]) / "run.json"
    if done.is_file():
        return
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    log = done.parent.with_suffix(".log")
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("w") as handle:
        subprocess.run(cmd, cwd=ROOT, env=env, stdout=handle, stderr=subprocess.STDOUT, check=True)


def table(out: Path, tasks: list[str], modes: list[str], seeds: list[int]) -> str:
    lines = ["| task | mode | cls | mean |", "|---|---|---|---|"]
    for task, mode in itertools.product(tasks, modes):
        cells = []
        for pooling in ("cls", "mean"):
            scores = []
            for seed in seeds:
                path = out / f"{task}-{mode}-{pooling}-s{seed}" / "run.json"
                if path.is_file():
                    scores.append(100 * json.loads(path.read_text())["dev_metrics"]["accuracy"])
            spread = f" ± {statistics.stdev(scores):.2f}" if len(scores) > 1 else ""
            each = ", ".join(f"{s:.2f}" for s in scores)
            cells.append(f"{statistics.mean(scores):.2f}{spread} ({each})" if scores else "-")
        lines.append(f"| {task} | {mode} | {cells[0]} | {cells[1]} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--tasks", nargs="+", default=["mrpc", "rte"])
    parser.add_argument("--modes", nargs="+", choices=list(MODES), default=list(MODES))
    args = parser.parse_args()
    out = args.out.resolve()
    # Each task, mode and seed once (a repeated one would run twice into one folder).
    tasks, modes, seeds = (list(dict.fromkeys(v)) for v in (args.tasks, args.modes, args.seeds))
    runs = [
        command(out, task, mode, pooling, seed, args.epochs)
        for task in tasks
        for mode in modes
        for seed in seeds
        for pooling in ("cls", "mean")
    ]
    with ThreadPoolExecutor(args.jobs) as pool:
        list(pool.map(run, runs))
    print(table(out, tasks, modes, seeds))


if __name__ == "__main__":
    main()
