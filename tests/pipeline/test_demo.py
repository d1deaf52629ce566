"""`adapterfleet demo` itself, from the console script, on the demo's tiny budget: the packaged
MiniLM, the generated task suite, local Ray, SQLite MLflow. What a new user sees first, in a
folder of their own (the demo's config ships with the package)."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

TASKS = ("demo_sentiment", "demo_aspect", "demo_negation", "demo_delivery")


@pytest.mark.slow
@pytest.mark.integration
def test_the_demo_runs_end_to_end_and_ends_with_its_summary(tmp_path: Path) -> None:
    command = Path(sys.executable).with_name("adapterfleet")
    venv_bin = str(command.parent)
    path = os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep) if p != venv_bin)
    storage = tmp_path / "runs"
    result = subprocess.run(
        [str(command), "demo", "-o", "budget=tiny", "-o", f"storage={storage}"],
        cwd=tmp_path,  # not the repository: a user who installed the package
        env={**os.environ, "PATH": path},
        capture_output=True,
        text=True,
        timeout=900,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-3000:]
    assert "\x1b[" not in output  # no colour codes in a log file
    lines = output.splitlines()
    # One line per epoch of every trial (one epoch per source, four for the target) and fusion.
    trial_epochs = [line for line in lines if re.match(r"trial \S+ epoch \d+/\d+: ", line)]
    assert len(trial_epochs) == 3 * 1 + 4
    fusion_epochs = [
        line for line in lines if re.match(r"fusion demo_delivery .*epoch \d+/3: ", line)
    ]
    assert len(fusion_epochs) == 3
    registered = max(i for i, line in enumerate(lines) if "registered demo.fusion" in line)
    table = [line for line in lines[registered:] if line.startswith("| demo_")]
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in table]
    assert [(row[0], row[1]) for row in rows] == [
        *((task, "adapter") for task in TASKS),
        ("demo_delivery", "fusion"),
    ]
    assert all(row[2] == "v1" for row in rows)
    scores = {(row[0], row[1]): float(row[5]) for row in rows}
    assert scores[("demo_aspect", "adapter")] > 0.5  # four balanced classes: chance is 0.25
    assert scores[("demo_negation", "adapter")] > 0.7  # two balanced classes
    ui = re.search(
        r"^wall time (\d+ min )?\d+ s\. See the runs: (adapterfleet ui .*)$", output, re.M
    )
    assert ui is not None, output[-2000:]
    assert ui[2] == f"adapterfleet ui -c demo -o budget=tiny -o storage={storage}"
    assert (storage / "mlflow.db").is_file()
    # the line's config and options find the pipeline again, from the same folder
    status = [str(command), "status", *shlex.split(ui[2])[2:]]
    shown = subprocess.run(status, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert shown.returncode == 0, shown.stdout + shown.stderr
    fusion = r"^FUSION .*\n^demo_delivery +demo_sentiment:v1,\S+ +v1 @best "
    assert re.search(fusion, shown.stdout, re.M), shown.stdout
    # `sweep resume` after it has nothing to train, and says that `run` trains the fusions (a
    # tester saw the fusion `not started` in `status` after it, with no word of why)
    resume = [str(command), "sweep", "resume", *shlex.split(ui[2])[2:]]
    resumed = subprocess.run(resume, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert resumed.stdout.splitlines()[-1] == (
        "sweep resume trains the adapters only; to train the fusions (demo_delivery) too: "
        f"adapterfleet run -c demo -o budget=tiny -o storage={storage}"
    ), resumed.stdout
