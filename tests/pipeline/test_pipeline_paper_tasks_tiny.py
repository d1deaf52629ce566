"""configs/paper-tasks.yaml on its tiny budget: the paper's task types side by side on real data
(RTE, MRPC, SST-2 classification, STS-B regression, CommonsenseQA multiple choice) through the
whole pipeline with the packaged MiniLM: an ST-A adapter per task, fusions on RTE and CSQA over
all five (the STS-B regression adapter among their sources), then `status` and the report, each
task in its own metric beside the paper's row where the paper has one."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from adapterfleet.results.paper_table1 import paper_cell
from adapterfleet.results.report_data import COLUMNS

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared" / "data"  # the config's data_root, ../../shared/data
CLI = str(Path(sys.executable).parent / "adapterfleet")
TASKS = ("rte", "mrpc", "sst2", "stsb", "csqa")
ACCURACY_TASKS = ("rte", "mrpc", "sst2", "csqa")  # classification and multiple choice
TARGETS = ("rte", "csqa")
pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        not (SHARED / "glue").is_dir() or not (SHARED / "csqa").is_dir(),
        reason=f"shared GLUE / CommonsenseQA data not found under {SHARED} "
        "(configs/paper-tasks.yaml reads them from ../shared/data)",
    ),
]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "MLFLOW_DISABLE_TELEMETRY": "true"}
    env.pop("MLFLOW_TRACKING_URI", None)
    return subprocess.run(
        [CLI, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=1500
    )


def test_tasks_lists_each_task_with_its_type_and_metric() -> None:
    listed = _cli("tasks", "-c", "configs/paper-tasks.yaml", "--set", "budget=tiny")
    assert listed.returncode == 0, listed.stderr[-2000:]
    lines = listed.stdout.splitlines()
    header = [c.strip() for c in lines[0].split("|")[1:-1]]
    cells = [[c.strip() for c in r.split("|")[1:-1]] for r in lines[2:]]
    rows = [dict(zip(header, row, strict=True)) for row in cells]
    keys = ("type", "train", "dev", "metric", "skipped rows")
    seen = {row["task"]: tuple(row[k] for k in keys) for row in rows}  # no labels
    assert seen == {
        "rte": ("classification", "32", "32", "accuracy", "0"),
        "mrpc": ("classification", "32", "32", "accuracy", "0"),
        "sst2": ("classification", "32", "32", "accuracy", "0"),
        "stsb": ("regression", "32", "32", "pearson", "0"),
        "csqa": ("multiple_choice", "32", "32", "accuracy", "0"),
    }
    labels = {row["task"]: row["labels"] for row in rows}
    assert labels["stsb"] == "numbers in [0, 5]" and labels["csqa"] == "A, B, C, D, E"
    chance = {row["task"]: row["dev chance level"] for row in rows}  # what learning nothing scores
    assert chance == {
        "rte": "entailment (56%)",
        "mrpc": "1 (62%)",
        "sst2": "1 (53%)",
        "stsb": "mean 2.907 (MSE 2.106)",  # always answering the mean
        "csqa": "A (38%)",
    }
    texts = {row["task"]: row["text columns"] for row in rows}  # what a predict input holds
    assert texts["rte"] == "sentence1, sentence2" and texts["csqa"] == "question, choices.text"


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The tiny budget run once: its storage folder and what `run` printed."""
    storage = tmp_path_factory.mktemp("paper-tasks")
    config = ["configs/paper-tasks.yaml", "--budget", "tiny", "-o", f"storage={storage}"]
    run = _cli("run", *config, "--num-cpus", "2")
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return storage, run.stdout


def _store(storage: Path) -> str:
    return f"sqlite:///{storage}/mlflow.db"


def test_each_task_and_both_fusions_are_registered(ran: tuple[Path, str]) -> None:
    status = _cli("status", "paper-tasks-tiny", "--tracking-uri", _store(ran[0]))
    assert status.returncode == 0, status.stderr[-2000:]
    adapters, fusions = status.stdout.split("\nFUSION ", 1)
    lines = {line.split()[0]: line for line in adapters.splitlines()[2:] if line.strip()}
    assert list(lines) == list(TASKS), status.stdout
    for task in TASKS:
        metric = "pearson" if task == "stsb" else "accuracy"
        assert re.search(rf" {metric} +v1 @best$", lines[task]), status.stdout
    fusions = fusions.splitlines()[1:]
    for target in TARGETS:
        line = next(row for row in fusions if row.startswith(f"{target} "))
        fused = ",".join(f"{task}:v1" for task in TASKS)  # the versions it fuses
        assert fused in line and "v1 @best" in line, status.stdout
        assert line.rstrip().endswith(" accuracy"), status.stdout


def test_the_report_shows_each_task_type_in_its_metric_beside_the_paper(
    ran: tuple[Path, str],
) -> None:
    storage = ran[0]
    command = ["report", "-c", "configs/paper-tasks.yaml", "--budget", "tiny"]
    report = _cli(*command, "-o", f"storage={storage}")  # no baselines: `run` wrote none
    assert report.returncode == 0, report.stderr[-2000:]
    out = storage / "report" / "paper-tasks-tiny"
    assert f"report: {out}" in report.stdout
    data = json.loads((out / "report.json").read_text())
    assert data["metric"] == "accuracy" and data["task_metrics"] == {"stsb": "pearson"}
    cells = {(c["task"], c["system"]): c for c in data["cells"]}
    for task in TASKS:
        metric = "pearson" if task == "stsb" else "accuracy"
        assert cells[(task, "st-a")][metric]["n"] == 1, task
    for target in TARGETS:
        assert cells[(target, "fusion-st-a")]["accuracy"]["n"] == 1, target
        assert "stsb:v1" in cells[(target, "fusion-st-a")]["lineage"], target
    assert -1.0 <= cells[("stsb", "st-a")]["pearson"]["mean"] <= 1.0  # a correlation, not points
    assert set(data["paper"]["accuracy"]) == set(ACCURACY_TASKS)
    table = (out / "table1.md").read_text()
    for task in ACCURACY_TASKS:
        assert re.search(rf"^\| {task} +\| ", table, re.M), task
        paper = [paper_cell(task, c.system) for c in COLUMNS]
        cells_text = [f"{p.mean:.2f}" + ("" if p.std is None else f" ± {p.std:.2f}") for p in paper]
        row = r" +\| ".join(re.escape(text) for text in cells_text)
        assert re.search(rf"^\| {task} \(paper\) +\| {row} +\|$", table, re.M), task
    # its Pearson as it is, four decimals (not × 100, which would read as a percentage)
    assert re.search(r"^\| stsb \(pearson\) +\| — +\| — +\| -?[01]\.\d{4} \(1\) +\|", table, re.M)
    assert "stsb (paper)" not in table
    assert "stsb: not a task of the paper's Table 1" in table
