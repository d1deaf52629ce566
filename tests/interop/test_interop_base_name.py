"""The base model an export records for AdapterHub (`model_name`): for the packaged MiniLM it
was a path into this machine's site-packages, which no other machine has; it is the hub id of
the same weights now, and importing a folder that records that id uses the packaged copy
(no network needed), so the round trip works offline."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import load_file

from adapterfleet.adapters import (
    ADAPTER_WEIGHTS,
    AdapterConfig,
    AdapterModel,
    add_adapter,
    load_encoder,
    save_adapter,
)
from adapterfleet.adapters.base_model import MINILM_HUB_ID
from adapterfleet.interop import export_adapterhub, import_adapterhub


def test_an_export_on_the_packaged_minilm_names_its_hub_id_and_imports_offline(
    tmp_path: Path,
) -> None:
    model = AdapterModel(load_encoder("minilm-l6"))
    add_adapter(model, "topic", AdapterConfig("pfeiffer", reduction_factor=16))
    ours = tmp_path / "ours"
    save_adapter(model, "topic", ours)
    export_adapterhub(ours, tmp_path / "hub")
    recorded = json.loads((tmp_path / "hub" / "adapter_config.json").read_text())
    assert recorded["model_name"] == MINILM_HUB_ID
    import_adapterhub(tmp_path / "hub", tmp_path / "back")  # no --base-model, no network
    before, after = (
        load_file(ours / ADAPTER_WEIGHTS),
        load_file(tmp_path / "back" / ADAPTER_WEIGHTS),
    )
    assert before.keys() == after.keys()
    assert all(torch.equal(before[k], after[k]) for k in before)
