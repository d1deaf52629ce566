"""The sizes the house rules bound (tests/test_layering.py enforces them): lines per package and
their share, files over 400 lines, functions over 60, function-local imports.

    python scripts/source_sizes.py [SRC]        # default: src/adapterfleet
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path


def main(src: Path) -> None:
    per_package: dict[str, int] = {}
    big, long_functions, local_imports = [], [], 0
    for path in sorted(src.rglob("*.py")):
        text = path.read_text(encoding="utf-8")
        lines = len(text.splitlines())
        parts = path.relative_to(src).parts
        per_package[parts[0]] = per_package.get(parts[0], 0) + lines
        if lines > 400:
            big.append(f"{path.relative_to(src)} ({lines})")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = node.end_lineno - node.lineno + 1  # type: ignore[operator]
                if length > 60:
                    long_functions.append(f"{path.relative_to(src)}:{node.name} ({length})")
                local_imports += sum(
                    isinstance(inner, ast.Import | ast.ImportFrom) for inner in ast.walk(node)
                )
    total = sum(per_package.values())
    print(f"{total} lines")
    for name, lines in sorted(per_package.items(), key=lambda item: -item[1]):
        print(f"  {name:<16} {lines:>6}  {lines / total:5.1%}")
    print(f"files over 400 lines: {', '.join(big) or 'none'}")
    print(f"functions over 60 lines: {', '.join(long_functions) or 'none'}")
    print(f"function-local imports: {local_imports}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path("src/adapterfleet"))
