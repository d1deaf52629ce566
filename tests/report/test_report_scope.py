"""`report -c CONFIG` counts only the runs made with the settings the config gives now.

One pipeline name, two settings of one config (as a re-run with `-o` makes them): first every
stage with seeds 0 and 1 and one epoch, then three epochs and seed 0 only. Each run is named by
its settings the way its producer names it (a trial by its sweep run's `config_hash`, a fusion
by `FusionPlan.trial_id`, a baseline by `BaselineJob.job_id`), in the real SQLite store. The
report of the second settings must not fill seed 1 from the first (the newest run per seed
would: ST-A 55.00 ± 2.83 (2) from 53 and 57), and shows nothing of a task the config does not
declare.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from mlflow import MlflowClient
from report_support import Pipeline, table_rows, uid
from typer.testing import CliRunner

from adapterfleet.cli.app import app
from adapterfleet.config import PipelineConfig, load_config
from adapterfleet.orchestration.baselines import plan_baselines
from adapterfleet.orchestration.fusion_plan import plan_fusion, seed_configs
from adapterfleet.registry import (
    ModelVersionInfo,
    adapter_model_name,
    open_sweep_run,
    open_trial_run,
    register_version,
)
from adapterfleet.registry.tags import TAG_BUDGET, TAG_OVERRIDES
from adapterfleet.results.report import build_report
from adapterfleet.tuning.spec import TAG_CONFIG_HASH, task_config_hash

CONFIG = """\
name: {name}
tracking_uri: {uri}
storage: {storage}
data_root: {storage}
tasks:
  sst2: {{train: sst2.tsv, dev: sst2.tsv, text_fields: [sentence], label_names: ["0", "1"]}}
adapters:
  reduction_factors: [16]
  learning_rates: [0.001]
  seeds: [0, 1]
  training: {{max_epochs: 1}}
fusion: {{targets: {{sst2: [sst2]}}, seeds: [0, 1], training: {{max_epochs: 1}}}}
baselines: {{systems: [head], tasks: [sst2], seeds: [0, 1], training: {{max_epochs: 1}}}}
"""
RERUN = [
    "adapters.training.max_epochs=3",
    "adapters.seeds=[0]",
    "fusion.seeds=[0]",
    "fusion.training.max_epochs=3",
    "baselines.seeds=[0]",
    "baselines.training.max_epochs=3",
]


@pytest.fixture
def two_settings(new_pipeline, tmp_path: Path) -> tuple[Pipeline, Path]:
    """The pipeline run with the config at the path as written, then re-run with `RERUN`."""
    p: Pipeline = new_pipeline()
    path = tmp_path / "pipeline.yaml"
    path.write_text(CONFIG.format(name=p.name, uri=p.uri, storage=tmp_path / "runs"))
    first, rerun = load_config(path), load_config(path, RERUN)
    _stages(p, first, {0: 0.52, 1: 0.57}, {0: 0.60, 1: 0.50}, {0: 0.54, 1: 0.58}, "KILLED")
    _stages(p, rerun, {0: 0.53}, {0: 0.70}, {0: 0.69}, "FINISHED")
    return p, path


def _stages(
    p: Pipeline,
    config: PipelineConfig,
    sweep: dict[int, float],
    fusion: dict[int, float],
    head: dict[int, float],
    sweep_status: str,
) -> None:
    """Runs of every stage with `config`'s settings: dev accuracy by seed."""
    parent = _sweep_run(p, config, "sst2", sweep_status)
    for seed, accuracy in sweep.items():
        p.trial("sst2", 16, 1e-3, seed, {"accuracy": accuracy}, parent=parent)
    versions = {"sst2": _registered_adapter(p, config, parent)}
    for seeded in seed_configs(config):
        plan = plan_fusion(seeded, "sst2", p.uri, versions)
        seed = seeded.fusion.training.seed
        p.fusion("sst2", plan.lineage, seed, {"accuracy": fusion[seed]}, fusion_id=plan.trial_id)
    for job in plan_baselines(config):
        p.baseline("head", job.task, job.seed, {"accuracy": head[job.seed]}, job_id=job.job_id)


def _sweep_run(p: Pipeline, config: PipelineConfig, task: str, status: str) -> str:
    """A task's sweep run tagged with the task's config hash, as the adapter stage opens it
    (`KILLED`: a Ctrl-C after its trials finished)."""
    run = open_sweep_run(
        p.uri,
        p.experiment_id,
        uid("sweep"),
        task,
        {TAG_CONFIG_HASH: task_config_hash(config, task)},
    )
    run.end(status)
    return run.run_id


def _registered_adapter(p: Pipeline, config: PipelineConfig, parent: str) -> ModelVersionInfo:
    """sst2's adapter registered for `config`'s settings (`@best`), as the sweep registers it."""
    folder = p.folder / uid("adapter")
    folder.mkdir(parents=True)
    (folder / "adapter.safetensors").write_bytes(uid("weights").encode())
    run = open_trial_run(p.uri, p.experiment_id, parent, uid("sst2-best"))
    run.log_artifacts(folder, "adapter")
    run.end("KILLED")  # not a finished trial: no cell of its own
    name = adapter_model_name(config.registry_prefix, "sst2")
    tags = {TAG_CONFIG_HASH: task_config_hash(config, "sst2")}
    return register_version(
        p.uri, name, run.run_id, "adapter", folder / "adapter.safetensors", tags
    )


def report_of(
    config: Path, overrides: list[str], out: Path
) -> tuple[dict[str, dict[str, str]], list[str]]:
    """`adapterfleet report -c CONFIG -o ...` as a user runs it: Table 1's rows and the notes."""
    options = [arg for item in overrides for arg in ("-o", item)]
    result = CliRunner().invoke(app, ["report", "-c", str(config), *options, "--out", str(out)])
    assert result.exit_code == 0, result.output
    notes = json.loads((out / "report.json").read_text())["notes"]
    return table_rows((out / "table1.md").read_text()), notes


def test_a_rerun_of_some_seeds_is_not_averaged_with_other_settings(
    two_settings: tuple[Pipeline, Path], tmp_path: Path
) -> None:
    _, config = two_settings
    rows, notes = report_of(config, RERUN, tmp_path / "out")
    assert rows["sst2"]["ST-A"] == "53.00 (1)"
    assert rows["sst2"]["Fusion w/ ST-A"] == "70.00 (1)"
    assert rows["sst2"]["Head"] == "69.00 (1)"
    other = "2 run(s) made with other settings than the config's left out"
    for column in ("ST-A", "Fusion w/ ST-A", "Head"):
        assert f"sst2 / {column}: {other}" in notes
    assert f"- sst2 / ST-A: {other}" in (tmp_path / "out" / "table1.md").read_text()


def test_the_first_settings_still_report_their_own_runs(
    two_settings: tuple[Pipeline, Path], tmp_path: Path
) -> None:
    _, config = two_settings
    rows, _ = report_of(config, [], tmp_path / "out")
    assert rows["sst2"]["ST-A"] == "54.50 ± 3.54 (2)"  # 52 and 57, its sweep run KILLED
    assert rows["sst2"]["Fusion w/ ST-A"] == "55.00 ± 7.07 (2)"
    assert rows["sst2"]["Head"] == "56.00 ± 2.83 (2)"


def test_runs_of_a_task_the_config_does_not_declare_are_not_shown(
    two_settings: tuple[Pipeline, Path], tmp_path: Path
) -> None:
    """Another user's config under the same name trains qnli and a Full baseline of sst2."""
    p, config = two_settings
    other = open_sweep_run(p.uri, p.experiment_id, uid("sweep"), "qnli", {TAG_CONFIG_HASH: "x"})
    other.end("FINISHED")
    p.trial("qnli", 16, 1e-3, 0, {"accuracy": 0.9}, parent=other.run_id)
    p.fusion("qnli", "qnli:v1", 0, {"accuracy": 0.91})
    p.baseline("full", "sst2", 0, {"accuracy": 0.92})
    rows, notes = report_of(config, RERUN, tmp_path / "out")
    assert [label for label in rows if "paper" not in label] == ["sst2"]
    assert rows["sst2"]["Full"] == "—"
    assert rows["sst2"]["ST-A"] == "53.00 (1)"
    undeclared = "left out (the config does not declare this task and system)"
    assert f"qnli / ST-A: 1 run(s) {undeclared}" in notes
    assert f"qnli / Fusion w/ ST-A: 1 run(s) {undeclared}" in notes
    assert f"sst2 / Full: 1 run(s) {undeclared}" in notes


def test_the_budget_and_overrides_stated_are_the_configs_not_the_last_runs(
    two_settings: tuple[Pipeline, Path], tmp_path: Path
) -> None:
    """Another user's run under the same name was the last to tag the experiment: its budget
    and `--set` overrides were stated as those of the report's numbers."""
    p, config = two_settings
    client = MlflowClient(p.uri)
    client.set_experiment_tag(p.experiment_id, TAG_BUDGET, "cpu")
    client.set_experiment_tag(p.experiment_id, TAG_OVERRIDES, '["tasks.qnli.rows=[0, 9]"]')
    report_of(config, RERUN, tmp_path / "out")
    text = (tmp_path / "out" / "table1.md").read_text()
    assert "qnli" not in text and "Budget `cpu`" not in text
    assert "No budget was used: the runs follow the config as written." in text
    listed = ", ".join(f"`{item}`" for item in RERUN)
    assert f"The config was read with these changes, with `--set` (these win): {listed}." in text
    budget = json.loads((tmp_path / "out" / "report.json").read_text())["budget"]
    assert budget == {"name": None, "trimmed": {}, "overrides": RERUN, "from": "config"}
    alone = build_report(p.name, p.uri, tmp_path / "alone", log_to_mlflow=False).markdown
    assert "The pipeline's last run also changed, with `--set` (these win): `tasks.qnli" in alone


def test_without_a_config_every_run_still_counts(
    two_settings: tuple[Pipeline, Path], tmp_path: Path
) -> None:
    """`report NAME` knows no settings: the newest run per seed, as before."""
    p, _ = two_settings
    rows = table_rows(build_report(p.name, p.uri, tmp_path / "out", log_to_mlflow=False).table)
    assert rows["sst2"]["ST-A"] == "55.00 ± 2.83 (2)"


def test_a_cell_no_better_than_the_majority_class_is_noted(two_settings, tmp_path, caplog) -> None:
    """A report of runs that learned nothing showed their numbers as results: the pipeline's
    own line said `no better than always answering 'no'`, the report did not. With the config's
    data readable, a note names each such cell (ST-A's 53.00 here, under the dev split's 60 %
    of '1'); the fusion's 70.00 and the head's 69.00 are above it and get none."""
    p, path = two_settings
    rows = [("it was fine", "1")] * 6 + [("it was not", "0")] * 4
    lines = ["sentence\tlabel", *(f"{text}\t{label}" for text, label in rows)]
    (tmp_path / "runs").mkdir(exist_ok=True)
    (tmp_path / "runs" / "sst2.tsv").write_text("\n".join(lines) + "\n")
    options = [arg for item in RERUN for arg in ("-o", item)]
    out = tmp_path / "report"
    with caplog.at_level("WARNING"):
        result = CliRunner().invoke(app, ["report", "-c", str(path), *options, "--out", str(out)])
    assert result.exit_code == 0, result.output
    notes = json.loads((out / "report.json").read_text())["notes"]
    # what loading the data warns (dev rows that are train rows here) was said when it trained
    assert not [r for r in caplog.records if r.name.startswith("adapterfleet.data")]
    chance = [note for note in notes if "no better than" in note]
    assert chance == [
        "sst2, st-a: accuracy 53.00; no better than always answering '1' (0.6000 of dev): it "
        "did not learn the task"
    ], notes
    # and on the console, under the table: the notes are in the files a reader may not open
    assert f"warning: {chance[0]}" in result.stderr


def test_a_report_of_every_run_does_not_replace_the_configs_in_mlflow(
    two_settings: tuple[Pipeline, Path], tmp_path: Path
) -> None:
    """`report NAME` (every run; no data, so no chance notes) logged into the report run a
    config's report had logged to: the config's table1.md, with its notes, was replaced. Each
    now has its run, named by what it counts; a second report of a scope logs into its own."""
    from mlflow import MlflowClient

    p, path = two_settings
    runner = CliRunner()
    options = [arg for item in RERUN for arg in ("-o", item)]
    scoped = runner.invoke(app, ["report", "-c", str(path), *options, "--out", str(tmp_path / "a")])
    assert scoped.exit_code == 0, scoped.output
    # the same settings in another order, naming where the runs are: the same report run
    where = ["-o", f"tracking_uri={p.uri}"]
    again = [*where, *[arg for item in reversed(RERUN) for arg in ("-o", item)]]
    twice = runner.invoke(app, ["report", "-c", str(path), *again, "--out", str(tmp_path / "a")])
    assert twice.exit_code == 0, twice.output
    for _ in range(2):
        alone = runner.invoke(
            app, ["report", p.name, "--tracking-uri", p.uri, "--out", str(tmp_path / "b")]
        )
        assert alone.exit_code == 0, alone.output
    client = MlflowClient(p.uri)
    runs = client.search_runs([p.experiment_id], "tags.`adapterfleet.kind` = 'report'")
    named = {run.info.run_name: run for run in runs}
    settings = f"report ({', '.join(sorted(RERUN))})"
    assert sorted(named) == [settings, "report (all runs)"], sorted(named)
    for name, folder in ((settings, "a"), ("report (all runs)", "b")):
        run_id = named[name].info.run_id
        logged = Path(client.download_artifacts(run_id, "table1.md", str(tmp_path / name)))
        assert logged.read_text() == (tmp_path / folder / "table1.md").read_text()
    assert (tmp_path / "a" / "table1.md").read_text() != (tmp_path / "b" / "table1.md").read_text()


def test_a_report_whose_settings_match_no_run_says_so_and_keeps_the_logged_one(
    two_settings: tuple[Pipeline, Path], tmp_path: Path
) -> None:
    """`report -c` without the -o the runs were made with printed a table of dashes and
    nothing else (why was in table1.md alone), and logged it over the report logged before."""
    from mlflow import MlflowClient

    p, path = two_settings
    runner = CliRunner()
    options = [arg for item in RERUN for arg in ("-o", item)]
    good = runner.invoke(app, ["report", "-c", str(path), *options, "--out", str(tmp_path / "a")])
    assert good.exit_code == 0 and "logged to MLflow run" in good.stdout, good.output
    assert "note: 6 runs made with other settings than the config's left out" in good.stdout
    other = [arg.replace("=3", "=5") for arg in options]
    empty = runner.invoke(app, ["report", "-c", str(path), *other, "--out", str(tmp_path / "b")])
    assert empty.exit_code == 0, empty.output
    said = re.search(
        r"warning: (\d+) runs made with other settings than the config's", empty.stderr
    )
    assert said and int(said.group(1)) >= 6, empty.stderr
    assert "(with its --budget and -o) left out, none counts: give the options" in empty.stderr
    assert "not logged to MLflow: no cell has a number" in empty.stdout
    client = MlflowClient(p.uri)
    (run,) = client.search_runs([p.experiment_id], "tags.`adapterfleet.kind` = 'report'")
    logged = Path(client.download_artifacts(run.info.run_id, "table1.md", str(tmp_path)))
    assert logged.read_text() == (tmp_path / "a" / "table1.md").read_text()
