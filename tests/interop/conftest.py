"""Fixtures for the interop tests: the reference's virtualenv (skip when it is not built), tiny
saved base encoders, fixed inputs, a runner for `ref_driver.py` inside that virtualenv, and a
saved run of ours with its export (for the tests that need no reference)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from helpers import perturb, tiny_encoder
from interop_support import FAMILIES, REF_FAMILIES
from safetensors.torch import load_file

from adapterfleet.adapters import (
    AdapterConfig,
    AdapterModel,
    HeadConfig,
    adapter_parameters,
    add_adapter,
    load_encoder,
    save_adapter,
    save_head,
)
from adapterfleet.fusion import FusionConfig, add_fusion, fusion_parameters, save_fusion
from adapterfleet.interop import export_adapterhub

ROOT = Path(__file__).resolve().parents[2]
DRIVER = Path(__file__).with_name("ref_driver.py")

SKIP_REASON = (
    "reference virtualenv .bench/ref-venv not built; run `make ref-venv` to build it "
    "(AdapterHub adapters 1.3.0 with transformers 4.57, a few minutes)"
)

Tensors = dict[str, torch.Tensor]
RunReference = Callable[[list[dict]], Tensors]


def _reference_python() -> Path | None:
    """The reference venv's python when `benchmarks/refenv.py` finished building it."""
    if str(ROOT) not in sys.path:
        sys.path.append(str(ROOT))  # appended: the repository root must shadow nothing
    from benchmarks.refenv import STAMP, python_of, venv_dir

    venv = venv_dir()
    python = python_of(venv)
    return python if (venv / STAMP).is_file() and python.exists() else None


@pytest.fixture(scope="session")
def ref_python() -> Path:
    python = _reference_python()
    if python is None:
        pytest.skip(SKIP_REASON)
    return python


@pytest.fixture(scope="session")
def bases(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A tiny random encoder of each family, saved with `save_pretrained` as a user's base is."""
    root = tmp_path_factory.mktemp("bases")
    for seed, family in enumerate(FAMILIES + REF_FAMILIES):
        tiny_encoder(family, seed=seed).save_pretrained(root / family)
    return {family: root / family for family in FAMILIES + REF_FAMILIES}


@pytest.fixture(scope="session")
def inputs() -> Tensors:
    """Two rows of eight tokens, the second padded at the end."""
    generator = torch.Generator().manual_seed(7)
    ids = torch.randint(5, 100, (2, 8), generator=generator)
    mask = torch.ones_like(ids)
    mask[1, -3:] = 0
    ids[1, -3:] = 0  # the pad id: a decoder's reference head finds the last token by it
    return {"input_ids": ids, "attention_mask": mask}


@pytest.fixture(scope="session")
def run_reference(
    ref_python: Path, inputs: Tensors, tmp_path_factory: pytest.TempPathFactory
) -> RunReference:
    """Run jobs (see `ref_driver.py`) in one reference process; returns its output tensors."""

    def run(jobs: list[dict]) -> Tensors:
        folder = tmp_path_factory.mktemp("reference-run")
        spec = {"inputs": {k: v.tolist() for k, v in inputs.items()}, "jobs": jobs}
        (folder / "spec.json").write_text(json.dumps(spec))
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
        command = [str(ref_python), str(DRIVER), str(folder / "spec.json"), str(folder / "out")]
        result = subprocess.run(command, capture_output=True, text=True, timeout=900, env=env)
        assert result.returncode == 0, f"reference driver failed:\n{result.stderr[-4000:]}"
        return load_file(folder / "out")

    return run


@pytest.fixture(scope="session")
def ours(bases, tmp_path_factory) -> Path:
    """Our adapters `a` (pfeiffer, rf 16) and `b`, a fusion `t` over them and a head `t`, saved
    as a run folder (adapter/, fusion/, head/) on the tiny BERT base."""
    root = tmp_path_factory.mktemp("ours")
    model = AdapterModel(load_encoder(str(bases["bert"])))
    for seed, name in enumerate(("a", "b")):
        add_adapter(model, name, AdapterConfig("pfeiffer", 16))
        perturb(adapter_parameters(model, name), seed=seed)
    add_fusion(model, "t", ["a", "b"], FusionConfig())
    perturb(fusion_parameters(model, "t"), seed=5, scale=0.1)
    model.add_head("t", HeadConfig(num_labels=3, label_names=["x", "y", "z"], dropout=0.2))
    save_adapter(model, "a", root / "run" / "adapter")
    save_adapter(model, "b", root / "b")
    save_fusion(model, "t", root / "run" / "fusion")
    save_head(model, "t", root / "run" / "head")
    return root


@pytest.fixture(scope="session")
def exported(ours, tmp_path_factory) -> Path:
    """The reference's layout of `ours`: adapter a, fusion t and head t in one folder."""
    out = tmp_path_factory.mktemp("exported") / "ref"
    export_adapterhub(ours / "run", out, torch_bin=True)  # the refusal tests edit the .bin
    return out
