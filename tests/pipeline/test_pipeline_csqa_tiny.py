"""configs/csqa.yaml on its tiny budget: the real CommonsenseQA slice (nested choices, answer
letters) and an SST-2 source through the whole pipeline with the packaged MiniLM (ST-A sweep,
registration, the fusion over both), then the report with the paper's CSQA row."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared" / "data"
CLI = str(Path(sys.executable).parent / "adapterfleet")
pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        not (SHARED / "csqa").is_dir() or not (SHARED / "glue").is_dir(),
        reason=f"shared CommonsenseQA / GLUE data not found under {SHARED}",
    ),
]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "MLFLOW_DISABLE_TELEMETRY": "true"}
    env.pop("MLFLOW_TRACKING_URI", None)
    return subprocess.run(
        [CLI, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=1500
    )


def test_csqa_trains_registers_fuses_and_reports_beside_the_paper(tmp_path: Path) -> None:
    config = ["configs/csqa.yaml", "--budget", "tiny", "-o", f"storage={tmp_path}"]
    run = _cli("run", *config, "--num-cpus", "2")
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    store = f"sqlite:///{tmp_path}/mlflow.db"
    report = _cli("report", "csqa-tiny", "--tracking-uri", store, "--out", str(tmp_path / "r"))
    assert report.returncode == 0, report.stderr[-2000:]
    data = json.loads((tmp_path / "r" / "report.json").read_text())
    cells = {(c["task"], c["system"]): c for c in data["cells"]}
    for cell in (("csqa", "st-a"), ("sst2", "st-a"), ("csqa", "fusion-st-a")):
        summary = cells[cell]["accuracy"]
        assert summary["n"] == 1 and 0.0 <= summary["mean"] <= 100.0, cell
    assert cells[("csqa", "fusion-st-a")]["lineage"].startswith("csqa:v1,sst2:v1")
    table = (tmp_path / "r" / "table1.md").read_text()
    assert re.search(r"^\| csqa \(paper\) +\| 41\.09 ± 0\.27 .* 58\.91 ± 0\.57 ", table, re.M)
