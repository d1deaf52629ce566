"""`adapterfleet clean` on the storage of a real pipeline run (local Ray, SQLite MLflow, a tiny
model): what it frees, what it keeps, and that a run after it redoes nothing."""

from __future__ import annotations

from pathlib import Path

import pytest
from tuning_support import PIPELINE, config_document, runs_of, version_numbers, write_config
from typer.testing import CliRunner

from adapterfleet._locks import exclusive_lock
from adapterfleet.cli.app import app
from adapterfleet.config import load_config

pytestmark = pytest.mark.integration


def test_clean_frees_what_a_finished_run_leaves_and_a_rerun_redoes_nothing(
    tmp_path: Path, tiny_model: Path, ray_local: None
) -> None:
    document = config_document(tmp_path, tiny_model, reduction_factors=[4])
    document["fusion"] = {
        "targets": {"fruit": "all"},
        "training": {"max_epochs": 1, "batch_size": 16, "learning_rate": 0.01, "device": "cpu"},
    }
    path = write_config(tmp_path, document)
    config = load_config(path)
    uri, storage = config.tracking_uri, Path(config.storage).resolve()
    first = CliRunner().invoke(app, ["run", str(path)])
    assert first.exit_code == 0, first.output
    (sweep,) = [folder.name for folder in (storage / "sweeps").iterdir()]
    (work,) = (storage / "fusion" / "fruit").iterdir()

    dry = CliRunner().invoke(app, ["clean", str(path), "--dry-run"])
    assert dry.exit_code == 0, dry.output
    lines = dry.stdout.splitlines()
    assert [line.split(" (")[0] for line in lines[:-1]] == [
        f"would remove ray/{PIPELINE}",
        f"would remove sweeps/{sweep}",
        f"would remove fusion/fruit/{work.name}",
    ]
    assert lines[1].endswith(
        f"the trials' folders of sweep {sweep}, finished (its adapters are registered)"
    )
    assert lines[2].endswith("the work folder of fusion fruit v1, registered")
    assert (
        lines[-1].startswith(f"clean {PIPELINE}: would free ")
        and "run it without --dry-run" in lines[-1]
    )
    assert (storage / "ray" / PIPELINE).is_dir() and work.is_dir()

    with exclusive_lock(work / ".training.lock"):  # a job trains it now: kept
        held = CliRunner().invoke(app, ["clean", str(path)])
    assert held.exit_code == 0, held.output
    assert f"kept fusion/fruit/{work.name}: a job trains it now" in held.stdout
    assert work.is_dir() and not (storage / "ray" / PIPELINE).exists()
    assert not (storage / "sweeps" / sweep).exists()

    tokens = CliRunner().invoke(app, ["clean", str(path), "--tokens"])
    assert tokens.exit_code == 0, tokens.output
    assert not work.exists() and not (storage / "tokens").exists()
    assert "removed tokens (" in tokens.stdout
    assert (storage / "mlflow.db").is_file()  # the store and its registered versions stay

    before = (len(runs_of(uri, "trial")), len(runs_of(uri, "fusion")))
    again = CliRunner().invoke(app, ["run", str(path)])
    assert again.exit_code == 0, again.output
    assert f"task fruit: already registered as {PIPELINE}.adapter.fruit v1, skipped" in again.stdout
    assert "fusion fruit: already registered as v1" in again.stdout
    assert (len(runs_of(uri, "trial")), len(runs_of(uri, "fusion"))) == before
    assert version_numbers(uri, f"{PIPELINE}.fusion.fruit") == [1]
