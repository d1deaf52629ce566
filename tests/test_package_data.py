"""What the wheel carries besides code: the demo's config, so `adapterfleet demo` runs from any
folder of a machine that installed the package (not only from a clone)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def test_the_wheel_ships_the_demo_config(tmp_path: Path) -> None:
    project = tmp_path / "project"  # a copy: the build writes its build/ and egg-info beside it
    shutil.copytree(ROOT / "src", project / "src", ignore=shutil.ignore_patterns("*.egg-info"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, project / name)
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(project), "--no-deps", "--no-build-isolation"]
        + ["--quiet", "--wheel-dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = tmp_path.glob("adapterfleet-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        shipped = archive.read("adapterfleet/configs/demo.yaml").decode()
    assert shipped == (ROOT / "configs" / "demo.yaml").read_text()
    assert yaml.safe_load(shipped)["name"] == "demo"
