"""adapterfleet.results, the read side, imports neither ray, torch nor mlflow (the store is read
through adapterfleet.registry) and nothing of the write side above it."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import adapterfleet.results

PACKAGE = Path(adapterfleet.results.__file__).parent
FORBIDDEN_ROOTS = {"ray", "torch", "mlflow"}
FORBIDDEN_MODULES = (
    "adapterfleet.orchestration",
    "adapterfleet.cli",
    "adapterfleet.tuning.sweep",
    "adapterfleet.tuning.trial",
    "adapterfleet.tuning.search",
    "adapterfleet.tuning.registration",
)


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_imports_stay_below_the_layer() -> None:
    files = sorted(PACKAGE.glob("*.py"))
    assert len(files) >= 7
    for path in files:
        for name in _imports(path):
            assert name.split(".")[0] not in FORBIDDEN_ROOTS, (path.name, name)
            assert not name.startswith(FORBIDDEN_MODULES), (path.name, name)


def test_import_loads_no_ray_torch_or_mlflow_and_names_resolve() -> None:
    code = (
        "import sys, adapterfleet.results as r, adapterfleet.results.report, "
        "adapterfleet.results.status\n"
        "r.build_report; r.pipeline_status; r.StatusPlan\n"
        "heavy = {'ray', 'torch', 'mlflow'} & set(sys.modules)\n"
        "assert not heavy, heavy\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert all(getattr(adapterfleet.results, n) is not None for n in adapterfleet.results.__all__)
