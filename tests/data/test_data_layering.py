"""adapterfleet.data is lazy, and the root helpers it uses need only the standard library (its
imports are checked with every layer's in tests/test_layering.py)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import adapterfleet.data

PACKAGE = Path(adapterfleet.data.__file__).parent
# The package's lazy-export helper: a root module every package's __init__ uses, stdlib only.
SHARED_HELPERS = {"adapterfleet._lazy"}


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_shared_helpers_import_only_the_standard_library() -> None:
    root = PACKAGE.parent
    for helper in SHARED_HELPERS:
        path = root / (helper.split(".")[-1] + ".py")
        imported = {name.split(".")[0] for name in _imports(path)}
        assert imported <= set(sys.stdlib_module_names) | {"__future__"}, (path.name, imported)


def test_import_is_lazy_and_names_resolve() -> None:
    code = (
        "import sys, adapterfleet.data as d\n"
        "heavy = {'torch', 'datasets', 'transformers', 'pyarrow'} & set(sys.modules)\n"
        "assert not heavy, heavy\n"
        "d.TaskSpec; d.TaskError; d.load_tasks_config\n"
        "assert 'torch' not in sys.modules and 'datasets' not in sys.modules\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert all(getattr(adapterfleet.data, name) is not None for name in adapterfleet.data.__all__)
