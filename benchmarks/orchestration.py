"""The pipeline on local Ray: how close the adapter stage comes to ideal packing, and how soon the
fusion starts after its last adapter is registered.

    python -m benchmarks.orchestration [--tasks 4] [--configs 2] [--examples 300]

Runs `adapterfleet run` (a fresh process, its own local Ray, a SQLite MLflow store) on the
generated demo tasks with the packaged MiniLM encoder, `--configs` reduction factors per task and
one fusion over every task. Then reads MLflow:
- makespan: from the first trial run's start to the last one's end (how well Tune packs the
  trials), and apart from it the start-up before the first trial (Ray, Tune, a trial actor's
  imports, and the early fusion job's warm-up competing for the CPU);
- ideal: Σ trial run durations / concurrent slots (CPUs / CPUs per trial);
- registration → fusion: from the newest adapter version's creation to the fusion run's
  `training_start_delay_s` (training code starts) and `first_step_delay_s` (first step).
Prints a JSON object and returns it to `benchmarks.run`.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
REDUCTION_FACTORS = (16, 32, 64, 8)
TARGET = "demo_delivery"


def write_config(folder: Path, tasks: int, configs: int, examples: int) -> Path:
    from adapterfleet.data.demo import CONFIG_NAME, generate_demo_suite

    data = folder / "data"
    generate_demo_suite(data)
    declared = yaml.safe_load((data / CONFIG_NAME).read_text())
    names = sorted(declared["tasks"], key=lambda n: n == TARGET)[-tasks:]  # the target included
    for name in names:
        declared["tasks"][name]["max_train_examples"] = examples
    (data / CONFIG_NAME).write_text(yaml.safe_dump(declared))
    config = {
        "name": "bench-orchestration",
        "base_model": "minilm-l6",
        "max_length": 128,
        "storage": str(folder / "runs"),
        "tracking_uri": f"sqlite:///{folder / 'mlflow.db'}",
        "tasks_file": str(data / CONFIG_NAME),
        "adapters": {
            "tasks": names,
            "reduction_factors": list(REDUCTION_FACTORS[:configs]),
            "learning_rates": [1e-3],
            "training": {"learning_rate": 1e-3, "max_epochs": 1, "batch_size": 32},
        },
        "fusion": {
            "targets": {TARGET: names},
            "training": {"learning_rate": 1e-3, "max_epochs": 1, "batch_size": 32},
        },
        "resources": {"cpu": 1},
    }
    path = folder / "pipeline.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def _seconds(ms: int | None) -> float | None:
    return None if ms is None else ms / 1000.0


def read_figures(uri: str, name: str, slots: int) -> dict[str, Any]:
    from mlflow import MlflowClient

    from adapterfleet.registry.tags import TAG_KIND

    client = MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name(name)
    runs = client.search_runs([experiment.experiment_id], max_results=1000)
    kinds: dict[str, list] = {}
    for run in runs:
        kinds.setdefault(run.data.tags.get(TAG_KIND, "?"), []).append(run)
    trials = kinds.get("trial", [])
    sweep_start = min(_seconds(r.info.start_time) for r in kinds.get("sweep", trials))
    durations = [(r.info.end_time - r.info.start_time) / 1000.0 for r in trials]
    trial_start = min(_seconds(r.info.start_time) for r in trials)
    trial_end = max(_seconds(r.info.end_time) for r in trials)
    makespan = trial_end - trial_start
    ideal = sum(durations) / slots
    versions = client.search_model_versions("", max_results=1000)
    adapter_created = [_seconds(v.creation_timestamp) for v in versions if "fusion" not in v.name]
    fusion = kinds.get("fusion", [{}])[0]
    metrics = fusion.data.metrics if fusion else {}
    return {
        "trials": len(trials),
        "slots": slots,
        "trial_seconds": sorted(round(d, 1) for d in durations),
        "makespan_s": round(makespan, 1),
        "ideal_s": round(ideal, 1),
        "makespan_over_ideal": round(makespan / ideal, 3) if ideal else None,
        "first_trial_start_after_sweep_s": round(trial_start - sweep_start, 1),
        "makespan_with_start_up_s": round(trial_end - sweep_start, 1),
        "last_adapter_registered_after_last_trial_s": round(max(adapter_created) - trial_end, 1),
        "registration_to_training_start_s": metrics.get("training_start_delay_s"),
        "registration_to_first_step_s": metrics.get("first_step_delay_s"),
        "fusion_dev_accuracy": metrics.get("best_dev_accuracy"),
    }


def run_pipeline(config: Path, folder: Path, cpus: int) -> tuple[float, str | None]:
    """`adapterfleet run CONFIG --num-cpus CPUS` in a fresh process, its output in
    `folder/pipeline.log`: (wall seconds, None), or (wall seconds, the error's last lines)."""
    command = [
        str(Path(sys.executable).parent / "adapterfleet"), "run", str(config),
        "--num-cpus", str(cpus),
    ]  # fmt: skip
    env = dict(os.environ, TOKENIZERS_PARALLELISM="false", HF_HUB_OFFLINE="1")
    start = time.time()
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    wall = time.time() - start
    (folder / "pipeline.log").write_text(done.stdout + done.stderr)
    if done.returncode == 0:
        return wall, None
    tail = (done.stdout + done.stderr).strip().splitlines()[-8:]
    return wall, f"exit {done.returncode}: " + " | ".join(tail)


def run(tasks: int, configs: int, examples: int, cpus: int, keep: Path | None) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="af-orch-") as tmp:
        folder = keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        config = write_config(folder, tasks, configs, examples)
        wall, error = run_pipeline(config, folder, cpus)
        if error is not None:
            return {"error": error, "wall_s": wall}
        figures = read_figures(f"sqlite:///{folder / 'mlflow.db'}", "bench-orchestration", cpus)
        return {"tasks": tasks, "configs": configs, "examples": examples,
                "pipeline_wall_s": round(wall, 1), **figures}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=4)
    parser.add_argument("--configs", type=int, default=2)
    parser.add_argument("--examples", type=int, default=300)
    parser.add_argument("--cpus", type=int, default=2, help="CPUs given to local Ray (slots)")
    parser.add_argument("--keep", type=Path, help="keep the run's files in this folder")
    args = parser.parse_args()
    print(json.dumps(run(args.tasks, args.configs, args.examples, args.cpus, args.keep), indent=1))


if __name__ == "__main__":
    main()
