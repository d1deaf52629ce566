"""Trials of one worker against trials of two (issue #23), on local Ray with the same CPUs.

    python -m benchmarks.workers [--examples 800] [--epochs 2] [--cpus 2]

Runs the same adapter sweep twice with `adapterfleet run` (a fresh process and local Ray each,
SQLite MLflow, the packaged MiniLM, 2 generated demo tasks × 2 reduction factors = 4 trials):
once as one-worker trials of 1 CPU (`--cpus` at a time), once as two-worker trials of 1 CPU per
worker (a Ray Train run each, `--cpus` / 2 at a time). For each it reads from MLflow and Tune:
- makespan: from the first trial run's start to the last one's end, and the whole command;
- per trial: its MLflow run's duration, the training time inside it (Σ epoch seconds the fit loop
  reported) and their difference, the trial's overhead (loading the model and data, and for two
  workers Ray Train starting and ending its worker group);
so the driver overhead a multi-worker trial adds is the difference of the two overheads.
Prints a JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
from pathlib import Path
from typing import Any

import yaml

from benchmarks.orchestration import run_pipeline, write_config

ROOT = Path(__file__).resolve().parent.parent
NAME = "bench-orchestration"  # the experiment write_config names


def sweep_config(folder: Path, examples: int, epochs: int, workers: int) -> Path:
    """orchestration's config with 2 tasks × 2 reduction factors, no fusion, `workers`."""
    path = write_config(folder, tasks=2, configs=2, examples=examples)
    config = yaml.safe_load(path.read_text())
    config.pop("fusion")
    config["adapters"]["training"]["max_epochs"] = epochs
    config["adapters"]["training"]["patience"] = None
    config["resources"] = {"cpu": 1, "workers": workers}
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def epoch_seconds(storage: Path) -> dict[str, float]:
    """Trial id -> Σ epoch seconds its Tune results carry (the fit loop's own timing)."""
    totals: dict[str, float] = {}
    for result in storage.glob("ray/*/*/result.json"):
        rows = [json.loads(line) for line in result.read_text().splitlines() if line.strip()]
        rows = [r for r in rows if "epoch_seconds" in r]
        if rows:
            trial = (
                str(rows[0]["config"].get("task"))
                + "-rf"
                + str(rows[0]["config"].get("reduction_factor"))
            )
            totals[trial] = sum(r["epoch_seconds"] for r in {r["epoch"]: r for r in rows}.values())
    return totals


def read_trials(folder: Path) -> dict[str, Any]:
    from mlflow import MlflowClient

    from adapterfleet.registry.tags import TAG_KIND

    client = MlflowClient(tracking_uri=f"sqlite:///{folder / 'mlflow.db'}")
    experiment = client.get_experiment_by_name(NAME)
    runs = [
        r
        for r in client.search_runs([experiment.experiment_id], max_results=1000)
        if r.data.tags.get(TAG_KIND) == "trial"
    ]
    trained = epoch_seconds(folder / "runs")
    rows = []
    for run in runs:
        key = f"{run.data.params['task']}-rf{run.data.params['reduction_factor']}"
        duration = (run.info.end_time - run.info.start_time) / 1000.0
        train = trained.get(key, float("nan"))
        rows.append(
            {"trial": key, "run_s": duration, "train_s": train, "overhead_s": duration - train}
        )
    start = min(r.info.start_time for r in runs) / 1000.0
    end = max(r.info.end_time for r in runs) / 1000.0
    return {
        "trials": len(rows),
        "makespan_s": round(end - start, 1),
        "train_s_mean": round(statistics.mean(r["train_s"] for r in rows), 1),
        "overhead_s_mean": round(statistics.mean(r["overhead_s"] for r in rows), 1),
        "per_trial": sorted(
            ({k: (round(v, 1) if isinstance(v, float) else v) for k, v in r.items()} for r in rows),
            key=lambda r: r["trial"],
        ),
    }


def sweep(examples: int, epochs: int, cpus: int, workers: int, keep: Path | None) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="af-workers-") as tmp:
        folder = (keep / f"workers-{workers}") if keep else Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        config = sweep_config(folder, examples, epochs, workers)
        wall, error = run_pipeline(config, folder, cpus)
        if error is not None:
            return {"error": error, "wall_s": wall}
        return {"workers": workers, "command_wall_s": round(wall, 1), **read_trials(folder)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=int, default=800)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--cpus", type=int, default=2)
    parser.add_argument("--keep", type=Path, help="keep the runs' files in this folder")
    args = parser.parse_args()
    load = os.getloadavg()
    one = sweep(args.examples, args.epochs, args.cpus, 1, args.keep)
    two = sweep(args.examples, args.epochs, args.cpus, 2, args.keep)
    result: dict[str, Any] = {"load_before": [round(x, 2) for x in load], "one": one, "two": two}
    if "error" not in one and "error" not in two:
        result["makespan_two_over_one"] = round(two["makespan_s"] / one["makespan_s"], 3)
        result["multi_worker_overhead_s"] = round(
            two["overhead_s_mean"] - one["overhead_s_mean"], 1
        )
        result["train_s_two_over_one"] = round(two["train_s_mean"] / one["train_s_mean"], 3)
    result["load_after"] = [round(x, 2) for x in os.getloadavg()]
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
