"""`status -c` when two configs of one pipeline name share a tracking store (the README says to
give each its own name; status must not misreport either way): the versions under `@best` may be
the other config's, and the rows say so instead of pairing them with this config's plan."""

from __future__ import annotations

from pathlib import Path

import pytest
from mlflow import MlflowClient
from typer.testing import CliRunner

from adapterfleet.cli.app import app
from adapterfleet.config import PipelineConfig, load_config
from adapterfleet.registry import (
    adapter_model_name,
    ensure_experiment,
    fusion_model_name,
    register_version,
)
from adapterfleet.registry.tags import TAG_KIND, TAG_LINEAGE
from adapterfleet.tuning.settings import TAG_SETTINGS, settings_tag
from adapterfleet.tuning.spec import TAG_CONFIG_HASH, task_config_hash

runner = CliRunner()
TASK = '{train: t.tsv, dev: t.tsv, text_fields: [sentence], label_names: ["0", "1"]}'


def write_config(
    folder: Path, file: str, tasks: tuple[str, ...], target: list[str], rf: int = 16
) -> Path:
    """A config of pipeline `shared` whose fusion target `c` fuses `target`, and `b` fuses a, b."""
    lines = ["name: shared", f"storage: {folder / 'store'}", "data_root: .", "tasks:"]
    lines += [f"  {task}: {TASK}" for task in tasks]
    lines += [f"adapters: {{reduction_factors: [{rf}], learning_rates: [0.001], seeds: [0]}}"]
    lines += [f"fusion: {{targets: {{c: [{', '.join(target)}], b: [a, b]}}}}"]
    (folder / file).write_text("\n".join(lines) + "\n")
    return folder / file


@pytest.fixture
def mine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """This user's config: tasks a, b, c; target c fuses a, b, c."""
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    (tmp_path / "t.tsv").write_text("sentence\tlabel\nx y\t0\nz w\t1\n")
    return write_config(tmp_path, "mine.yaml", ("a", "b", "c"), ["a", "b", "c"])


def register(config: PipelineConfig, kind: str, task: str, tags: dict[str, str]) -> int:
    """A version of `task`'s adapter or fusion under `best`, tagged as the pipeline tags it."""
    experiment = ensure_experiment(config.tracking_uri, config.name)
    run = MlflowClient(config.tracking_uri).create_run(experiment, tags={TAG_KIND: kind})
    weights = config.storage.parent / f"{kind}-{task}.safetensors"
    weights.write_bytes(task.encode())
    name = (adapter_model_name if kind == "adapter" else fusion_model_name)(config.name, task)
    info = register_version(
        config.tracking_uri, name, run.info.run_id, kind, weights, tags=tags, alias="best"
    )
    return info.version


def status_lines(config: Path) -> list[str]:
    result = runner.invoke(app, ["status", "-c", str(config)])
    assert result.exit_code == 0, result.output
    return result.output.splitlines()


def test_a_fusion_row_shows_what_its_version_fuses(mine: Path) -> None:
    """A tester's fleet.yaml (demo_delivery: sentiment, negation, delivery) read
    `demo_sentiment,demo_negation,demo_delivery  v6 @best  0.4375` while v6, registered by
    another config of the same name, fused demo_aspect instead of demo_negation."""
    config = load_config(mine)
    for task in ("a", "b", "c", "d"):
        register(config, "adapter", task, {"metric": "accuracy", "metric_value": "0.5"})
    theirs = {
        "adapter.a": "v1",
        "adapter.d": "v1",
        "adapter.c": "v1",
        TAG_LINEAGE: "a:v1,d:v1,c:v1",
    }
    register(config, "fusion", "c", {"metric": "accuracy", "dev_accuracy": "0.4375", **theirs})
    ours = {"adapter.a": "v1", "adapter.b": "v1", TAG_LINEAGE: "a:v1,b:v1"}
    register(config, "fusion", "b", {"metric": "accuracy", "dev_accuracy": "0.5", **ours})
    lines = status_lines(mine)
    header = lines.index(next(line for line in lines if line.startswith("FUSION")))
    assert lines[header + 1].split() == ["c", "a:v1,d:v1,c:v1", "v1", "@best", "0.4375", "accuracy"]
    assert lines[header + 2].split() == ["b", "a:v1,b:v1", "v1", "@best", "0.5000", "accuracy"]
    assert lines[header + 3 :] == [
        "fusion c v1 @best fuses d and not b, unlike this config: made by another config of "
        "this pipeline name, or before its target changed"
    ]


def trained_for(config: PipelineConfig, task: str) -> dict[str, str]:
    """The tags the sweep's registration gives an adapter of `config`'s settings."""
    settings = settings_tag(config, task)
    assert settings is not None
    hashed = {TAG_CONFIG_HASH: task_config_hash(config, task), TAG_SETTINGS: settings}
    return {**hashed, "metric": "accuracy", "metric_value": "0.5"}


def test_a_task_row_notes_an_adapter_trained_with_other_settings(mine: Path) -> None:
    """The other config of the name (rf 4) registered a's `@best`: its row read `v1 @best`
    beside that version's score, with no word that this config (rf 16) did not train it."""
    config = load_config(mine)
    other = write_config(mine.parent, "theirs.yaml", ("a", "b", "c", "d"), ["a", "d", "c"], rf=4)
    register(config, "adapter", "a", trained_for(load_config(other), "a"))
    register(config, "adapter", "b", trained_for(config, "b"))
    register(config, "adapter", "c", {"metric": "accuracy"})  # an import: no settings to compare
    lines = status_lines(mine)
    rows = [line.partition(" ")[0] for line in lines[1:]]
    assert rows[:5] == ["TASK", "a", "b", "c", "adapter"] and rows[5:7] == ["", "FUSION"], lines
    assert lines[5] == (
        "adapter a v1 @best was trained with other settings than this config's "
        "(adapters.reduction_factors: [4] → [16]): made by another config of this pipeline "
        "name, or before this one changed"
    )
