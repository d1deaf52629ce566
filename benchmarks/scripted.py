"""The configurations of `make bench` that a script of their own measures and reports.

Each is optional in a full run (run.py's OPTIONAL_AFTER_S) and runs with `--only NAME`; its
result is kept under the `ours` side and its table written to RESULTS.md between the markers
`<!-- NAME-table:begin -->` and `<!-- NAME-table:end -->`, next to the analysis that reads it.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable
from typing import Any


def fusion_profile(spec: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    from benchmarks import common, profile_fusion

    common.set_threads(args.threads)
    return profile_fusion.measure(n=spec["n"], batch=spec["batch"], seq=spec["seq"],
                                  steps=spec["steps"])  # fmt: skip


def llm_versus(spec: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    from benchmarks import llm_versus as module

    options = module.parse(["--batch", str(spec["batch"]), "--seq", str(spec["seq"]),
                            "--threads", str(args.threads), "--reps", str(args.reps or 2),
                            "--n", *map(str, spec["n"])])  # fmt: skip
    return module.measure(options)


def packing(spec: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    from benchmarks import packing as module

    if not module.GLUE.is_dir():
        return {"error": f"{module.GLUE} is absent (the GLUE files this compares on)"}
    return module.measure(spec["tasks"], spec["examples"], spec["epochs"])


KINDS: dict[str, Callable[[dict[str, Any], argparse.Namespace], dict[str, Any]]] = {
    "fusion_profile": fusion_profile,
    "llm_versus": llm_versus,
    "packing": packing,
}
MODULES = {"fusion_profile": "profile_fusion", "llm_versus": "llm_versus", "packing": "packing"}


def block(kind: str, result: dict[str, Any]) -> str:
    """The table a scripted configuration writes into RESULTS.md: its script's `markdown`."""
    module = importlib.import_module(f"benchmarks.{MODULES[kind]}")
    return module.markdown(result).strip()
