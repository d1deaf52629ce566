"""The reference implementation's own virtualenv: AdapterHub `adapters` pins transformers 4.57.

Built on first use under `.bench/ref-venv` (override with `ADAPTERFLEET_BENCH_REF_VENV`):
torch first (the CPU wheel, from /opt/wheels when that folder exists), then `adapters`, which
brings its own transformers. A stamp file records a finished build, so a half-built folder is
rebuilt instead of used.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TORCH = "torch==2.13.0"
ADAPTERS = "adapters==1.3.0"
WHEELS = Path("/opt/wheels")
STAMP = ".adapterfleet-bench-ref"


def venv_dir() -> Path:
    return Path(os.environ.get("ADAPTERFLEET_BENCH_REF_VENV", ROOT / ".bench" / "ref-venv"))


def python_of(venv: Path) -> Path:
    return venv / "bin" / "python"


def _base_python() -> str:
    """The interpreter the project's venv was made from (a venv's own python would do too)."""
    base = getattr(sys, "_base_executable", None)
    if base and Path(base).exists():
        return base
    return shutil.which("python3") or sys.executable


def _pip(python: Path, *args: str) -> None:
    links = ["--find-links", str(WHEELS)] if WHEELS.is_dir() else []
    command = [str(python), "-m", "pip", "install", "-q", *links, *args]
    print("  $", " ".join(command), flush=True)
    subprocess.run(command, check=True)


def versions(python: Path) -> dict[str, str]:
    code = (
        "import json, torch, transformers, adapters; "
        "print(json.dumps({'torch': torch.__version__, 'transformers': transformers.__version__, "
        "'adapters': adapters.__version__}))"
    )
    out = subprocess.run([str(python), "-c", code], check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def ensure_ref_venv() -> Path:
    """The reference venv's python, building the venv first if it is missing or unfinished."""
    venv = venv_dir()
    python = python_of(venv)
    if (venv / STAMP).is_file() and python.exists():
        return python
    if venv.exists():
        print(f"reference venv {venv} is incomplete: rebuilding it", flush=True)
        shutil.rmtree(venv)
    print(f"building the reference venv in {venv} (torch, then {ADAPTERS}; a few minutes)")
    venv.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([_base_python(), "-m", "venv", str(venv)], check=True)
    _pip(python, TORCH)
    _pip(python, ADAPTERS)
    found = versions(python)
    if not found["transformers"].startswith("4.57"):
        raise RuntimeError(f"reference venv got transformers {found['transformers']}, not 4.57.x")
    (venv / STAMP).write_text(json.dumps(found) + "\n")
    print(f"reference venv ready: {found}", flush=True)
    return python


if __name__ == "__main__":
    print(ensure_ref_venv())
