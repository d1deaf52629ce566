"""An AdapterHub fusion saved with its head, the head named after the fusion (`a1,a2`): the
import refused with `head name 'a1,a2' must use letters, digits, '_' or '-' only` and did not
say that `--name NAME` imports it; it now says so, before a base model is loaded."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from adapterfleet.interop import InteropError, import_adapterhub

FILES = (
    "adapter_fusion_config.json",
    "pytorch_model_adapter_fusion.bin",
    "head_config.json",
    "pytorch_model_head.bin",
)


def _fusion_with_head(exported: Path, folder: Path) -> Path:
    """The exported fusion and head, the head named as AdapterHub names a fusion's: `a,b`."""
    folder.mkdir(parents=True)
    for name in FILES:
        shutil.copy(exported / name, folder / name)
    meta = json.loads((folder / "head_config.json").read_text())
    (folder / "head_config.json").write_text(json.dumps({**meta, "name": "a,b"}))
    weights = torch.load(folder / "pytorch_model_head.bin", weights_only=True)
    renamed = {key.replace("heads.t.", "heads.a,b."): value for key, value in weights.items()}
    torch.save(renamed, folder / "pytorch_model_head.bin")
    return folder


def test_a_head_named_after_its_fusion_is_refused_naming_name(exported, tmp_path) -> None:
    folder = _fusion_with_head(exported, tmp_path / "saved")
    with pytest.raises(InteropError) as caught:
        import_adapterhub(folder, tmp_path / "out", "/no/such/base-model")
    assert str(caught.value) == (
        f"{folder / 'head_config.json'}: head name 'a,b' must use letters, digits, '_' or '-' "
        "only; give the imported adapter a name with --name NAME"
    )
    assert not (tmp_path / "out").exists()

    done = import_adapterhub(folder, tmp_path / "out", name="t")
    assert (done.head, done.fusion, done.fused) == ("t", "t", ("a", "b"))


def test_import_adapter_help_documents_name() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "adapterfleet.cli.app", "import-adapter", "--help"],
        capture_output=True, text=True, timeout=120, env={"COLUMNS": "200", "PATH": ""},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "--name" in result.stdout and "Name for what is imported" in result.stdout
