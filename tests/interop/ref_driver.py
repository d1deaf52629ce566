"""Drives the reference (AdapterHub `adapters` 1.x) for the interop tests, in its own virtualenv.

`python ref_driver.py SPEC.json OUT.safetensors`. Imports nothing from adapterfleet. SPEC holds the
inputs and a list of jobs; each job builds a reference model on a base folder, either creating
modules with random weights and saving them (`make`, `save`) or loading saved ones (`load`), then,
on the spec's inputs or the job's own (`inputs`; (rows, choices, tokens) for a multiple-choice
head), records the last hidden state (`<id>.hidden`), the plain base's (`<id>.plain`) and, with a
head, the logits (`<id>.logits`), all in eval mode and float32.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import torch


def _model(job: dict[str, Any]) -> Any:
    import adapters
    from adapters import AutoAdapterModel
    from transformers import AutoModel

    if job.get("plain"):  # a plain encoder with adapters.init: saves keys without the prefix
        model = AutoModel.from_pretrained(job["base"], local_files_only=True)
        adapters.init(model)
        return model
    return AutoAdapterModel.from_pretrained(job["base"], local_files_only=True)


def _randomize(model: Any, marker: str, gen: torch.Generator, scale: float) -> None:
    with torch.no_grad():
        for name, param in model.named_parameters():
            if marker in name:
                noise = torch.randn(param.shape, generator=gen)
                if name.endswith("value.weight"):  # V stays near the identity
                    param.copy_(torch.eye(param.shape[0]) + scale * noise)
                else:
                    param.copy_(scale * noise)


def _make(model: Any, make: dict[str, Any]) -> None:
    from adapters.composition import Fuse

    gen = torch.Generator().manual_seed(make.get("seed", 0))
    for adapter in make.get("adapters", []):
        model.add_adapter(adapter["name"], config=adapter["config"])
        _randomize(model, f".adapters.{adapter['name']}.", gen, adapter.get("scale", 0.2))
    if make.get("fusion"):
        fusion = make["fusion"]
        model.add_adapter_fusion(Fuse(*fusion["adapters"]), config=fusion.get("config", "dynamic"))
        _randomize(model, ".adapter_fusion_layer.", gen, 0.3)
    if make.get("head"):
        head = make["head"]
        if head.get("type") == "multiple_choice":
            model.add_multiple_choice_head(head["name"], num_choices=head["num_choices"])
        else:  # classification; one label: the reference's regression head
            model.add_classification_head(head["name"], num_labels=head["num_labels"])
        _randomize(model, f"heads.{head['name']}.", gen, 0.3)


def _save(model: Any, save: dict[str, Any], safe: bool) -> None:
    folders = list(save.get("adapters", {}).values())
    if save.get("fusion"):
        folders.append(save["fusion"]["folder"])
    for folder in folders:  # the reference makes the last folder of a path only
        os.makedirs(os.path.dirname(folder), exist_ok=True)
    for name, folder in save.get("adapters", {}).items():
        model.save_adapter(folder, name, use_safetensors=safe)
    if save.get("fusion"):
        fusion = save["fusion"]
        model.save_adapter_fusion(
            fusion["folder"],
            fusion["adapters"],
            with_head=fusion.get("with_head") or False,
            use_safetensors=safe,
        )
    if save.get("head"):
        name, folder = save["head"]
        model.save_head(folder, name, use_safetensors=safe)


def _load(model: Any, load: dict[str, Any], safe: bool) -> None:
    for folder in load.get("adapters", []):
        model.load_adapter(folder, use_safetensors=safe)
    if load.get("fusion"):
        model.load_adapter_fusion(load["fusion"], use_safetensors=safe)
    if load.get("head"):
        model.load_head(load["head"], use_safetensors=safe)


def _activate(model: Any, active: Any) -> None:
    from adapters.composition import Fuse

    model.set_active_adapters(Fuse(*active) if isinstance(active, list) else active)


def _outputs(model: Any, job: dict[str, Any], inputs: dict[str, torch.Tensor]) -> dict:
    model.eval()
    base = model.base_model if hasattr(model, "heads") else model
    flat = {k: v.reshape(-1, v.shape[-1]) for k, v in inputs.items()}  # (rows x choices, tokens)
    out = {}
    with torch.no_grad():
        model.set_active_adapters(None)
        out["plain"] = base(**flat).last_hidden_state
        _activate(model, job["activate"])
        out["hidden"] = base(**flat).last_hidden_state
        if job.get("head"):
            out["logits"] = model(**inputs, head=job["head"]).logits
    return {f"{job['id']}.{k}": v.float().contiguous() for k, v in out.items()}


def run(spec: dict[str, Any]) -> dict[str, torch.Tensor]:
    inputs = {k: torch.tensor(v) for k, v in spec["inputs"].items()}
    results: dict[str, torch.Tensor] = {}
    for job in spec["jobs"]:
        torch.manual_seed(0)
        model = _model(job)
        safe = bool(job.get("use_safetensors"))
        _make(model, job.get("make", {}))
        _save(model, job.get("save", {}), safe)
        _load(model, job.get("load", {}), safe)
        own = {k: torch.tensor(v) for k, v in job.get("inputs", {}).items()}
        results.update(_outputs(model, job, own or inputs))
    return results


def main() -> None:
    import logging

    from safetensors.torch import save_file
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    logging.getLogger("adapters").setLevel(logging.ERROR)  # "none are activated" for `plain`
    torch.set_num_threads(1)
    with open(sys.argv[1]) as handle:
        spec = json.load(handle)
    save_file(run(spec), sys.argv[2])


if __name__ == "__main__":
    main()
