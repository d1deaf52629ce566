"""The house rules of ../shared/DESIGN.md ("Layers"), checked on the source: which package may
import which, where ray, mlflow and torch may be imported, and the sizes that keep files readable.

Every import counts, function-local ones included. Each rule is also run on a small tree that
breaks it, so a rule that could never fail would show here.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import adapterfleet

SRC = Path(adapterfleet.__file__).parent

# Top to bottom: a package imports only packages below it (DESIGN.md's drawing).
ORDER = (
    "cli",
    "orchestration",
    "results",
    "tuning",
    "registry",
    "interop",
    "training",
    "data",
    "fusion",
    "adapters",
)
# Root modules every layer may use: standard library only, no adapterfleet package.
SHARED = {"_lazy", "_locks", "_hashing", "_files", "_hub", "console", "disk", "errors", "masking"}
# Tighter than "anything below": what DESIGN.md says each of these may import.
ALLOWED = {
    "results": {"config", "registry"},  # registry only; no Ray, no training
    "registry": set(),  # moves directories and metadata: no torch-model code
    "interop": {"adapters", "fusion"},
    "data": set(),
}
# The config (schema + document) sits beside the layers: it reads the task declarations, the
# training settings, the adapter settings and the default store, and nothing else.
CONFIG_MAY_IMPORT = (
    "adapterfleet.data",
    "adapterfleet.training.config",
    "adapterfleet.adapters.config",
    "adapterfleet.registry.store",
    "adapterfleet.config",
)
CONFIG_USERS = {"cli", "orchestration", "results", "tuning"}
THIRD_PARTY = {
    "ray": {"tuning", "orchestration"},
    "mlflow": {"registry"},
    "torch": {"orchestration", "tuning", "interop", "training", "data", "fusion", "adapters"},
}
MAX_PACKAGE_SHARE = 0.20
MAX_FILE_LINES = 400
MAX_FUNCTION_LINES = 60


def imports(path: Path) -> Iterator[tuple[int, str]]:
    """(line, module) of every absolute import in `path`, function-local ones included."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            yield from ((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.lineno, node.module


def layer_of(src: Path, path: Path) -> str:
    """`cli`, `config`, ... for a file of the package rooted at `src`."""
    parts = path.relative_to(src).parts
    return parts[0] if len(parts) > 1 else parts[0].removesuffix(".py")


def import_violations(src: Path) -> list[str]:
    """Every import of the tree at `src` that breaks a rule, as `file:line: why`."""
    found = []
    for path in sorted(src.rglob("*.py")):
        layer = layer_of(src, path)
        for line, module in imports(path):
            why = _why_not(layer, module)
            if why:
                found.append(f"{path.relative_to(src)}:{line}: {layer} imports {module} ({why})")
    return found


def _why_not(layer: str, module: str) -> str | None:
    root, _, rest = module.partition(".")
    if root in THIRD_PARTY and layer not in THIRD_PARTY[root]:
        return f"only {sorted(THIRD_PARTY[root])} import {root}"
    if root != "adapterfleet" or not rest:
        return None
    target = rest.split(".")[0]
    if target == layer or target in SHARED:
        return None
    if layer in SHARED:
        return "shared root modules import no adapterfleet package"
    if layer == "config":
        ok = any(module == m or module.startswith(m + ".") for m in CONFIG_MAY_IMPORT)
        return None if ok else f"config imports only {CONFIG_MAY_IMPORT}"
    if target == "config":
        return None if layer in CONFIG_USERS else "a layer below the config cannot read it"
    if layer in ALLOWED:
        return None if target in ALLOWED[layer] else f"{layer} imports only {ALLOWED[layer]}"
    if target not in ORDER or layer not in ORDER:
        return f"{target or layer} is not a known layer"
    return None if ORDER.index(target) > ORDER.index(layer) else "an upward import"


def size_violations(src: Path) -> list[str]:
    """Packages over their share of the lines, files and functions over their length."""
    found = []
    lines = {path: len(path.read_text(encoding="utf-8").splitlines()) for path in src.rglob("*.py")}
    total = sum(lines.values())
    per_layer: dict[str, int] = {}
    for path, count in lines.items():
        per_layer[layer_of(src, path)] = per_layer.get(layer_of(src, path), 0) + count
        if count > MAX_FILE_LINES:
            found.append(f"{path.relative_to(src)}: {count} lines (at most {MAX_FILE_LINES})")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = node.end_lineno - node.lineno + 1  # type: ignore[operator]
                if length > MAX_FUNCTION_LINES:
                    where = f"{path.relative_to(src)}:{node.lineno} {node.name}"
                    found.append(f"{where}: {length} lines (at most {MAX_FUNCTION_LINES})")
    for layer, count in per_layer.items():
        if count > MAX_PACKAGE_SHARE * total:
            found.append(f"{layer}/: {count} of {total} lines (at most {MAX_PACKAGE_SHARE:.0%})")
    return found


def test_every_import_follows_the_layers() -> None:
    assert import_violations(SRC) == []


def test_files_functions_and_packages_keep_their_size() -> None:
    assert size_violations(SRC) == []


def test_every_layer_of_the_drawing_exists() -> None:
    present = {layer_of(SRC, path) for path in SRC.rglob("*.py")}
    assert set(ORDER) | {"config"} <= present


@pytest.mark.parametrize(
    ("layer", "source", "words"),
    [
        ("fusion", "from adapterfleet.training import fit\n", "upward"),
        ("adapters", "import ray\n", "import ray"),
        ("training", "def f():\n    import mlflow\n", "import mlflow"),
        ("results", "import torch\n", "import torch"),
        ("results", "from adapterfleet.tuning.trial import run_trial\n", "results imports only"),
        ("registry", "from adapterfleet.adapters import load_adapter\n", "registry imports only"),
        ("data", "from adapterfleet.config import load_config\n", "below the config"),
        ("config", "from adapterfleet.orchestration import run_pipeline\n", "config imports only"),
        ("console", "from adapterfleet.data import TaskSpec\n", "shared root modules"),
    ],
)
def test_a_broken_rule_is_found(tmp_path: Path, layer: str, source: str, words: str) -> None:
    src = tmp_path / "adapterfleet"
    module = src / f"{layer}.py" if layer in SHARED | {"config"} else src / layer / "bad.py"
    module.parent.mkdir(parents=True, exist_ok=True)
    module.write_text(source)
    found = import_violations(src)
    assert len(found) == 1 and words in found[0], found


def test_an_oversized_function_and_file_are_found(tmp_path: Path) -> None:
    src = tmp_path / "adapterfleet"
    (src / "adapters").mkdir(parents=True)
    body = "".join(f"    x{i} = {i}\n" for i in range(MAX_FUNCTION_LINES))
    (src / "adapters" / "big.py").write_text("def long():\n" + body + "\n" * MAX_FILE_LINES)
    found = size_violations(src)
    assert any("long: 61 lines" in f for f in found), found
    assert any("big.py: " in f and "lines (at most 400)" in f for f in found), found


def loaded_after(code: str, watched: set[str]) -> list[str]:
    """Which of `watched` a fresh interpreter has loaded after running `code`."""
    probe = f"import sys\n{code}\nprint(sorted(set(sys.modules) & {set(watched)!r}))\n"
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return ast.literal_eval(result.stdout.strip().splitlines()[-1])


def test_the_lower_layers_load_neither_ray_nor_mlflow() -> None:
    code = (
        "import adapterfleet.adapters, adapterfleet.fusion, adapterfleet.data\n"
        "import adapterfleet.training, adapterfleet.interop, adapterfleet.config\n"
        "from adapterfleet.training import fit\n"
        "from adapterfleet.adapters import add_adapter\n"
    )
    assert loaded_after(code, {"ray", "mlflow"}) == []


def test_the_read_side_loads_neither_ray_nor_torch_nor_mlflow() -> None:
    code = (
        "import pkgutil, importlib, adapterfleet.results as r\n"
        "for m in pkgutil.iter_modules(r.__path__):\n"
        "    importlib.import_module(f'{r.__name__}.{m.name}')\n"
        "assert all(getattr(r, name) for name in r.__all__)\n"
    )
    assert loaded_after(code, {"ray", "torch", "mlflow"}) == []


def test_importing_a_layer_package_loads_no_torch() -> None:
    # A notebook's `import adapterfleet.fusion` took 6.6 s: its __init__ loaded torch at once.
    code = "import adapterfleet.adapters, adapterfleet.fusion, adapterfleet.config\n"
    assert loaded_after(code, {"torch", "ray", "mlflow"}) == []
