"""`adapterfleet report` as a user runs it: a real subprocess of the installed command against
the real SQLite store of `table1_pipeline`; exit codes, one-line errors, the folder it writes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from report_support import Pipeline, table_rows
from typer.testing import CliRunner

from adapterfleet.cli.app import app

COMMAND = Path(sys.executable).with_name("adapterfleet")
RTE_ST_A = "72.00 ± 2.00 (3)"


def adapterfleet(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(COMMAND), "report", *args], cwd=cwd, capture_output=True, text=True, timeout=300
    )


def test_report_by_name_prints_the_table_and_writes_the_default_folder(
    table1_pipeline: Pipeline, tmp_path: Path
) -> None:
    result = adapterfleet(table1_pipeline.name, "--tracking-uri", table1_pipeline.uri, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    rows = table_rows(result.stdout)
    assert rows["rte"]["ST-A"] == RTE_ST_A
    assert rows["rte (paper)"]["Fusion w/ ST-A"] == "76.82 ± 1.68"
    folder = tmp_path / "adapterfleet-report" / table1_pipeline.name
    assert f"report: {Path('adapterfleet-report') / table1_pipeline.name}" in result.stdout
    for name in ("table1.md", "figure4.png", "figure4.json", "report.json"):
        assert (folder / name).is_file(), name
    assert RTE_ST_A in (folder / "table1.md").read_text()


def test_report_with_a_config_uses_its_store_and_storage_and_out_overrides(
    table1_pipeline: Pipeline, tmp_path: Path
) -> None:
    storage = tmp_path / "runs"
    config = tmp_path / "pipeline.yaml"
    config.write_text(
        f"name: {table1_pipeline.name}\nstorage: {storage}\n"
        f"tracking_uri: {table1_pipeline.uri}\ndata_root: {tmp_path}\n"
        "tasks:\n  rte: {train: a.tsv, dev: a.tsv, text_fields: [s], label_names: [a, b]}\n"
    )
    runner = CliRunner()  # in this process: the subprocess tests above show the real command
    result = runner.invoke(app, ["report", "-c", str(config)])
    assert result.exit_code == 0, result.output
    assert (storage / "report" / table1_pipeline.name / "table1.md").is_file()

    out = tmp_path / "elsewhere"
    result = runner.invoke(app, ["report", "-c", str(config), "--out", str(out)])
    assert result.exit_code == 0, result.output
    written = (out / "table1.md").read_text()  # no sweep of this config made those trials
    assert table_rows(written)["rte"]["ST-A"] == "—"
    assert "- rte / ST-A: 5 run(s) made with other settings than the config's left out" in written
    wrong = runner.invoke(app, ["report", "other-name", "-c", str(config)])
    assert wrong.exit_code == 2 and "is not the name of" in wrong.output
    (tmp_path / "afile").write_text("kept")  # --out a file: one line, not FileExistsError
    blocked = runner.invoke(app, ["report", "-c", str(config), "--out", str(tmp_path / "afile")])
    assert blocked.exit_code == 2, blocked.output
    assert f"error: --out: cannot write the report into {tmp_path / 'afile'} (" in blocked.output
    assert (tmp_path / "afile").read_text() == "kept"


def test_unknown_experiment_is_one_error_line_and_exit_2(
    table1_pipeline: Pipeline, tmp_path: Path
) -> None:
    result = adapterfleet("no-such-pipeline", "--tracking-uri", table1_pipeline.uri, cwd=tmp_path)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: no experiment 'no-such-pipeline' in sqlite:///")
    assert "check the name" in lines[0] and "--tracking-uri" in lines[0]
    assert "(pipelines there: " in lines[0] and "none)" not in lines[0]  # it named none
    assert "give the --budget and -o the runs were made with" in lines[0]
    assert not (tmp_path / "adapterfleet-report").exists()


def test_a_store_that_does_not_exist_is_reported_not_created(tmp_path: Path) -> None:
    db = tmp_path / "nothing" / "mlflow.db"
    result = adapterfleet("demo", "--tracking-uri", f"sqlite:///{db}", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.startswith(f"error: no tracking store at {db}: nothing was tracked")
    assert not db.exists() and not db.parent.exists()


def test_experiment_without_finished_runs_says_so(new_pipeline, tmp_path: Path) -> None:
    p: Pipeline = new_pipeline()
    p.trial("rte", 16, 1e-3, 0, {"accuracy": 0.7}, status=None)  # still running
    result = adapterfleet(p.name, "--tracking-uri", p.uri, cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"error: experiment '{p.name}' in {p.uri} has no finished trial, fusion or baseline "
        f"runs yet; nothing to report (see `adapterfleet status {p.name}`)"
    ]


def test_the_command_loads_no_torch() -> None:
    code = (
        "import sys, adapterfleet.cli.app, adapterfleet.results.report\n"
        "assert 'torch' not in sys.modules, 'torch imported'\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
