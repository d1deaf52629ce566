"""The README's Python API block, run as a user pastes it: in a folder of its own, in a fresh
interpreter. It loaded `out/mnli`, which nothing in it wrote."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_the_python_api_block_runs_as_pasted(tmp_path: Path) -> None:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("\n## Python API\n", 1)[1]
    block, pipeline = re.findall(r"```python\n(.*?)```", section.split("\n## ", 1)[0], re.S)
    imports = "\n".join(line for line in pipeline.splitlines() if line.startswith("from "))
    assert "run_pipeline" in imports and "load_config" in imports, pipeline  # they resolve:
    found = subprocess.run([sys.executable, "-c", imports], capture_output=True, text=True)
    assert found.returncode == 0, found.stderr[-2000:]  # (the run itself: the demo test's)
    (tmp_path / "snippet.py").write_text(block)
    ran = subprocess.run(
        [sys.executable, "snippet.py"], cwd=tmp_path, capture_output=True, text=True, timeout=600
    )
    assert ran.returncode == 0, ran.stderr[-3000:]
    rows = re.findall(r"\[\s*([0-9.e+-]+),\s*([0-9.e+-]+)\]", ran.stdout)
    assert len(rows) == 4, ran.stdout
    assert all(abs(float(a) + float(b) - 1) < 1e-4 for a, b in rows)  # probabilities
    for folder in ("out/sentiment", "out/delivery"):
        assert (tmp_path / folder / "adapter.safetensors").is_file()
    assert (tmp_path / "out/fusion/model_adapter_fusion.safetensors").is_file()
    # loaded onto a fresh base with set_active=True, the fusion predicts as the one trained
    assert ran.stdout.splitlines()[-1] == "True", ran.stdout
