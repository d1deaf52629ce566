"""Trials of two workers (a Ray Train run of two gloo processes inside the Tune trial, on the
local Ray): the same adapter as a one-worker trial, one MLflow run with each epoch once, the
adapter registered."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from tuning_support import config_document, metric_steps, runs_of

from adapterfleet.adapters import ADAPTER_WEIGHTS
from adapterfleet.config import parse_config
from adapterfleet.orchestration.sweep import run_adapter_stage
from adapterfleet.registry import pull

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def still_model(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny BERT with dropout off: two workers draw other masks than one process."""
    folder = tmp_path_factory.mktemp("no-dropout") / "model"
    shutil.copytree(tiny_model, folder)
    config = json.loads((folder / "config.json").read_text())
    config.update(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def sweep(root: Path, model: Path, resources: dict) -> tuple[dict, list[str], object]:
    document = config_document(root, model, tasks=["fruit"], reduction_factors=[4])
    document["adapters"]["training"].update(batch_size=15, max_epochs=2)  # odd: unequal shards
    document["resources"] = resources
    config = parse_config(document, root)
    lines: list[str] = []
    registered = run_adapter_stage(config, progress=lines.append)
    return registered, lines, config


def adapter_tensors(config, version) -> dict[str, torch.Tensor]:
    folder = pull(config.tracking_uri, version.name, config.storage / "pulled")
    return load_file(str(Path(folder) / ADAPTER_WEIGHTS))


def test_two_workers_train_the_adapter_one_worker_trains(ray_local, still_model, tmp_path):
    one, _, config_one = sweep(tmp_path / "one", still_model, {"cpu": 1})
    two, lines, config_two = sweep(tmp_path / "two", still_model, {"cpu": 1, "workers": 2})
    alone = adapter_tensors(config_one, one["fruit"])
    pair = adapter_tensors(config_two, two["fruit"])
    assert alone.keys() == pair.keys() and alone
    for key in alone:
        torch.testing.assert_close(pair[key], alone[key], rtol=1e-4, atol=1e-5)
    trials = runs_of(config_two.tracking_uri, "trial")
    assert len(trials) == 1 and trials[0].info.status == "FINISHED"
    run_id = trials[0].info.run_id
    assert metric_steps(config_two.tracking_uri, run_id, "train_loss") == [1, 2]
    print("\n".join(lines))
    assert any("epoch 1/2" in line for line in lines), lines
    assert any("epoch 2/2" in line for line in lines), lines
    assert two["fruit"].run_id == run_id
