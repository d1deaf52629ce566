"""A baseline job's MLflow run, as `run_baseline_job` leaves it (in this process, no Ray): its
result logged like a trial's and a fusion's, `best_epoch` with it."""

from __future__ import annotations

from pathlib import Path

import yaml
from local_support import FAST
from tuning_support import mlflow_client

from adapterfleet.config import PipelineConfig, load_config
from adapterfleet.orchestration.baselines import plan_baselines, run_baseline_job
from adapterfleet.registry import ensure_experiment
from adapterfleet.training.modes import read_run_file


def _with_baselines(config: PipelineConfig, root: Path) -> PipelineConfig:
    document = yaml.safe_load((root / "pipeline.yaml").read_text())
    document["baselines"] = {
        "systems": ["head", "mt-a"],
        "tasks": ["fruit"],
        "seeds": [0],
        "training": {**FAST, "max_epochs": 2, "device": "cpu"},
    }
    (root / "baselines.yaml").write_text(yaml.safe_dump(document))
    return load_config(root / "baselines.yaml")


def test_a_baseline_run_logs_its_best_epoch_as_trials_and_fusions_do(
    config: PipelineConfig, root: Path
) -> None:
    """Trials and fusion runs logged `best_epoch` beside their result; baseline runs (and MT-A's
    per-task runs) logged their `best_dev_<metric>` alone, at step 0."""
    config = _with_baselines(config, root)
    uri = config.tracking_uri
    experiment = ensure_experiment(uri, config.name)
    client = mlflow_client(uri)
    for job in plan_baselines(config):
        outcome = run_baseline_job(config, job, uri, experiment, say=lambda _: None)
        best = read_run_file(Path(outcome.run_dir)).fit.best_epoch
        kind = "mt-a" if job.system == "mt-a" else "baseline"
        runs = client.search_runs(
            [experiment], f"tags.`adapterfleet.trial_id` LIKE '{job.job_id}%'"
        )
        assert {r.data.tags["adapterfleet.kind"] for r in runs} >= {kind}, job.label
        for run in runs:  # MT-A: its joint run and one baseline run per task
            history = client.get_metric_history(run.info.run_id, "best_epoch")
            assert [(m.step, m.value) for m in history] == [(best, best)], job.label
            for key in (k for k in run.data.metrics if k.startswith("best_dev_")):
                steps = [m.step for m in client.get_metric_history(run.info.run_id, key)]
                assert steps == [best], (job.label, key)
