"""A registered world for the prediction and pruning tests: the tiny keyword tasks of the sweep
tests (tests/tuning_support.py), one ST-A adapter per task trained on this machine and
registered as a trial would be, and the fusion for `fruit` trained and registered by the real
fusion stage (`run_fusion_job`), all in a SQLite MLflow store under a temporary folder."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest
from tuning_support import config_document, write_config

TRAINING = {"max_epochs": 2, "batch_size": 16, "learning_rate": 0.01, "device": "cpu"}


@dataclass(frozen=True)
class World:
    config_path: Path
    config: object  # PipelineConfig
    uri: str
    adapter_runs: dict[str, Path]  # task -> local run folder (adapter/, head/)
    fusion_run: Path  # the fusion stage's work folder: run/ (fusion/, head/) and adapters/


@pytest.fixture(scope="session")
def world(tmp_path_factory: pytest.TempPathFactory, tiny_model: Path) -> World:
    from adapterfleet.adapters import ADAPTER_WEIGHTS, HEAD_WEIGHTS
    from adapterfleet.config import load_config
    from adapterfleet.orchestration.fusion_job import run_fusion_job
    from adapterfleet.orchestration.local import train_task
    from adapterfleet.registry import (
        TAG_TASK,
        adapter_model_name,
        ensure_experiment,
        open_trial_run,
        register_version,
    )

    root = tmp_path_factory.mktemp("prediction")
    document = config_document(root, tiny_model)
    document["fusion"] = {"targets": {"fruit": "all"}, "training": TRAINING}
    config_path = write_config(root, document)
    config = load_config(config_path)
    uri = config.tracking_uri
    experiment = ensure_experiment(uri, config.name)
    runs = {}
    for task in ("fruit", "water"):
        run = train_task(
            config,
            task,
            "st-a",
            root / "trials" / task,
            reduction_factor=4,
            train_config=config.adapters.training,
        )
        logger = open_trial_run(uri, experiment, None, f"trial-{task}", tags={TAG_TASK: task})
        logger.log_artifacts(run.out_dir / "adapter", "adapter")
        logger.log_artifacts(run.out_dir / "head", "head")
        weights = run.out_dir / "adapter" / ADAPTER_WEIGHTS
        name = adapter_model_name(config.registry_prefix, task)
        head = run.out_dir / "head" / HEAD_WEIGHTS
        register_version(
            uri,
            name,
            logger.run_id,
            "adapter",
            weights,
            {TAG_TASK: task},
            companions={"head": head},
        )
        logger.end("FINISHED")
        runs[task] = run.out_dir
    outcome = run_fusion_job(config, "fruit", uri, experiment, timeout_s=60, say=print)
    assert outcome.trained
    (fusion_work,) = (Path(config.storage).resolve() / "fusion" / "fruit").iterdir()
    return World(config_path, config, uri, runs, fusion_work)
