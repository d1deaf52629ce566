"""configs/glue-fusion.yaml on its tiny budget: every stage and every system of the paper's
Table 1 on real GLUE data with the packaged MiniLM, through the real CLI, then the report."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import GLUE_DIR

from adapterfleet.config import load_config

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not GLUE_DIR.is_dir(), reason=f"GLUE data not found at {GLUE_DIR}"),
]
ROOT = Path(__file__).resolve().parents[2]
CLI = str(Path(sys.executable).parent / "adapterfleet")
COLUMNS = ("head", "full", "st-a", "st-a-houlsby", "mt-a", "fusion-st-a", "fusion-mt-a")


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "MLFLOW_DISABLE_TELEMETRY": "true"}
    return subprocess.run(
        [CLI, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=1500
    )


def test_the_tiny_budget_fills_every_cell_of_table_1_and_draws_figure_4(tmp_path):
    config = ["configs/glue-fusion.yaml", "--budget", "tiny", "-o", f"storage={tmp_path}"]
    run = _cli("run", *config, "--num-cpus", "2")
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    folder = tmp_path / "report" / "glue-fusion-tiny"
    assert f"report: {folder}" in run.stdout
    # the `adapterfleet ui` it suggests opens this run's store (the storage= override moved it)
    ui = re.search(r"See the runs: adapterfleet ui -c (.*)$", run.stdout, re.M)
    assert ui is not None, run.stdout[-2000:]
    path, *options = shlex.split(ui.group(1))
    assert options[::2] == ["-o"] * (len(options) // 2), options
    store = load_config(ROOT / path, options[1::2]).tracking_uri
    assert store == f"sqlite:///{tmp_path.resolve()}/mlflow.db"
    data = json.loads((folder / "report.json").read_text())
    assert set(data["tasks"]) >= {"rte", "mrpc"}
    cells = {(c["task"], c["system"]): c for c in data["cells"]}
    for task in ("rte", "mrpc"):
        for system in COLUMNS:
            summary = cells[(task, system)]["accuracy"]
            assert summary["n"] == 1 and 0.0 <= summary["mean"] <= 100.0, (task, system)
    assert cells[("mrpc", "fusion-st-a")]["f1"]["n"] == 1  # MRPC also reports F1
    assert data["budget"]["name"] == "tiny"
    assert data["budget"]["trimmed"]["tasks.rte.max_train_examples"] == 48
    assert data["budget"]["overrides"] == [f"storage={tmp_path}"]  # the --set on top
    rows = [(row["target"], row["system"]) for row in (data["figure4"] or {"rows": []})["rows"]]
    assert sorted(rows) == [(t, s) for t in ("mrpc", "rte") for s in ("fusion-mt-a", "fusion-st-a")]
    assert (folder / "figure4.png").stat().st_size > 10_000
    table = (folder / "table1.md").read_text()
    assert re.search(r"^\| rte +\| [0-9]", table, re.M)  # our row, with numbers
    assert re.search(r"^\| rte \(paper\) +\|.* 71\.04 ", table, re.M)  # the paper's ST-A beside it

    # the report again, by name from the store alone
    store, out = f"sqlite:///{tmp_path}/mlflow.db", tmp_path / "again"  # not ./adapterfleet-report
    again = _cli("report", "glue-fusion-tiny", "--tracking-uri", store, "--out", str(out))
    assert again.returncode == 0, again.stderr[-2000:]
    assert "Fusion w/ MT-A" in again.stdout and re.search(r"^\| mrpc +\|", again.stdout, re.M)
    # the same report, but for whose `--set` it states: the config's, or the last run's
    ours = "The config was read with these changes, with `--set` (these win): `storage="
    theirs = "The pipeline's last run also changed, with `--set` (these win): `storage="
    assert ours in table and theirs in (out / "table1.md").read_text()
    by_name = (out / "table1.md").read_text().replace(theirs, ours)
    # and the notes on cells at chance, which the config's data gives (48 examples learn
    # little) and the store alone cannot
    assert table.startswith(by_name) and "## Notes" not in by_name
    assert "\n## Notes\n" in table[len(by_name) - 1 :]
    assert "; no better than always answering " in table[len(by_name) :]
