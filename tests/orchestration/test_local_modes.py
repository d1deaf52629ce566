"""Every mode of the paper's Table 1 trains and evaluates end to end with the real MiniLM."""

import dataclasses
import json
from pathlib import Path

import pytest
import torch
from helpers import GLUE_DIR
from safetensors.torch import load_file

from adapterfleet.config import load_config
from adapterfleet.orchestration.local import evaluate_run, fuse_task, train_task
from adapterfleet.training import TrainConfig

ROOT = Path(__file__).resolve().parents[2]
FAST = TrainConfig(learning_rate=1e-3, max_epochs=1, batch_size=16, eval_batch_size=32)
pytestmark = pytest.mark.skipif(not GLUE_DIR.is_dir(), reason=f"GLUE data not found at {GLUE_DIR}")


@pytest.fixture(scope="module")
def glue(tmp_path_factory):
    storage = tmp_path_factory.mktemp("runs")
    slice_ = [
        f"tasks.{t}.max_{s}_examples={n}"
        for t in ("rte", "mrpc")
        for s, n in (("train", 48), ("dev", 24))
    ]
    return load_config(
        ROOT / "configs" / "glue.yaml", [*slice_, f"storage={storage}", "max_length=64"]
    )


@pytest.mark.parametrize("mode", ["head", "full", "st-a", "st-a-houlsby"])
def test_single_task_modes_train_save_and_evaluate_rte(glue, tmp_path, mode):
    rf = 16 if mode.startswith("st-a") else None  # head and full train no adapter
    run = train_task(glue, "rte", mode, tmp_path / mode, reduction_factor=rf, train_config=FAST)
    assert run.fit.epochs_run == 1 and 0.0 <= run.dev_metrics["accuracy"] <= 1.0
    saved = json.loads((tmp_path / mode / "run.json").read_text())
    assert saved["mode"] == mode and saved["dev_metrics"] == run.dev_metrics
    assert (tmp_path / mode / "head" / "model_head.safetensors").is_file()
    assert (tmp_path / mode / "adapter").is_dir() == mode.startswith("st-a")
    assert (tmp_path / mode / "model").is_dir() == (mode == "full")
    again = evaluate_run(glue, "rte", tmp_path / mode)
    assert again["accuracy"] == pytest.approx(run.dev_metrics["accuracy"])


def test_fusion_over_st_a_adapters_and_over_mt_a(glue, tmp_path):
    dirs = []
    for task in ("rte", "mrpc"):
        train_task(glue, task, "st-a", tmp_path / task, reduction_factor=32, train_config=FAST)
        dirs.append(tmp_path / task / "adapter")
    fusion = fuse_task(glue, "rte", dirs, tmp_path / "fusion", train_config=FAST)
    assert fusion.lineage["adapters"] == ["rte", "mrpc"]
    weights = load_file(tmp_path / "fusion" / "fusion" / "model_adapter_fusion.safetensors")
    assert {k.split(".", 2)[2] for k in weights} == {
        "query.weight",
        "query.bias",
        "key.weight",
        "key.bias",
        "value.weight",
    }
    assert evaluate_run(glue, "rte", tmp_path / "fusion")["accuracy"] == pytest.approx(
        fusion.dev_metrics["accuracy"]
    )

    mta_config = dataclasses.replace(
        glue, adapters=dataclasses.replace(glue.adapters, tasks=("rte", "mrpc"))
    )
    mta = train_task(
        mta_config, "rte", "mt-a", tmp_path / "mta", reduction_factor=32, train_config=FAST
    )
    assert sorted(p.name for p in (tmp_path / "mta" / "adapters").iterdir()) == ["mrpc", "rte"]
    assert mta.trainable_parameters > 20_000_000  # the base is fine-tuned too
    fused = fuse_task(
        glue,
        "rte",
        [tmp_path / "mta" / "adapters" / t for t in ("rte", "mrpc")],
        tmp_path / "mta-fusion",
        train_config=FAST,
        base_model=str(tmp_path / "mta" / "model"),
    )
    assert 0.0 <= fused.dev_metrics["accuracy"] <= 1.0


@pytest.mark.slow
def test_st_a_learns_well_above_majority_and_head_only(tmp_path):
    config = load_config(ROOT / "configs" / "demo.yaml", [f"storage={tmp_path}"])
    # 1,500 short reviews, 2 epochs (~94 steps): ST-A reaches ~95% here, head-only ~60%
    train = TrainConfig(learning_rate=1e-3, max_epochs=2, batch_size=32)
    st_a = train_task(config, "demo_sentiment", "st-a", tmp_path / "st-a", train_config=train)
    head = train_task(config, "demo_sentiment", "head", tmp_path / "head", train_config=train)
    assert st_a.dev_metrics["accuracy"] > 0.8  # balanced labels: the majority class is 0.5
    assert st_a.dev_metrics["accuracy"] > head.dev_metrics["accuracy"] + 0.1


def _saved(folder: Path) -> dict:
    return {
        f"{path.parent.name}/{key}": tensor
        for path in sorted(folder.glob("*/*.safetensors"))
        for key, tensor in load_file(path).items()
    }


def test_a_seed_fixes_the_result_whatever_ran_before_in_the_process(glue, tmp_path):
    # A Ray worker trains one job after another (fusion seeds 0, 1, 2 in one job): the seed
    # alone must decide the new layers' initial weights, not what the process drew before.
    adapters, fusions = [], []
    for i in range(2):
        torch.rand(1000 * (i + 1))
        out = tmp_path / f"st-a-{i}"
        train_task(glue, "rte", "st-a", out, reduction_factor=32, train_config=FAST)
        adapters.append(_saved(out))
        torch.rand(1000 * (i + 1))
        dirs = [tmp_path / "st-a-0" / "adapter"]
        fuse_task(glue, "rte", dirs, tmp_path / f"f{i}", train_config=FAST)
        fusions.append(_saved(tmp_path / f"f{i}"))
    for first, second in (adapters, fusions):
        assert len(first) > 4 and first.keys() == second.keys()
        assert all(torch.equal(first[k], second[k]) for k in first), [
            k for k in first if not torch.equal(first[k], second[k])
        ]
