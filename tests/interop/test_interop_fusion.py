"""AdapterFusion layers and classification heads against the real reference, both ways.

The reference fuses three adapters of different widths (and, in one case, two with the static
fusion) under a classification head; we import all of it and compute its hidden states and
logits. We export a fusion and a head over our adapters; the reference loads them and computes ours.
"""

from __future__ import annotations

import pytest
from helpers import perturb
from interop_support import assert_same_output, last_hidden

from adapterfleet.adapters import (
    AdapterConfig,
    AdapterModel,
    HeadConfig,
    adapter_parameters,
    add_adapter,
    load_adapter,
    load_encoder,
    load_head,
    save_adapter,
    save_head,
)
from adapterfleet.adapters.architectures import default_pooling
from adapterfleet.fusion import (
    FusionConfig,
    add_fusion,
    fusion_parameters,
    fusion_setups,
    load_fusion,
    save_fusion,
    set_active_fusion,
)
from adapterfleet.interop import export_adapterhub, import_adapterhub

WIDTHS = {"a0": 8, "a1": 16, "a2": 4}  # reduction factors of the fused adapters
# case -> (family, fused adapters, fusion preset)
CASES = {
    "bert-dynamic-3": ("bert", ["a0", "a1", "a2"], "dynamic"),
    "roberta-dynamic-3": ("roberta", ["a0", "a1", "a2"], "dynamic"),
    "distilbert-dynamic-3": ("distilbert", ["a0", "a1", "a2"], "dynamic"),
    "bert-static-2": ("bert", ["a0", "a1"], "static"),
    **{
        f"{family}-dynamic-2": (family, ["a0", "a1"], "dynamic")
        for family in ("albert", "deberta", "deberta-v2", "gpt2", "llama", "mistral")
    },
}
TARGET = "target"


def _reference_job(case: str, root, bases, seed: int) -> dict:
    family, fused, preset = CASES[case]
    folder = root / case
    adapters = [{"name": a, "config": {**_SEQ_BN, "reduction_factor": WIDTHS[a]}} for a in fused]
    return {
        "id": case,
        "base": str(bases[family]),
        "make": {
            "adapters": adapters,
            "fusion": {"adapters": fused, "config": preset},
            "head": {"name": TARGET, "num_labels": 3},
            "seed": seed,
        },
        "save": {
            "adapters": {a: str(folder / a) for a in fused},
            "fusion": {"adapters": fused, "folder": str(folder / "fusion"), "with_head": TARGET},
        },
        "activate": fused,
        "head": TARGET,
    }


_SEQ_BN = {"mh_adapter": False, "output_adapter": True, "original_ln_before": True,
           "non_linearity": "relu"}  # fmt: skip


@pytest.fixture(scope="module")
def made_by_reference(run_reference, bases, tmp_path_factory):
    root = tmp_path_factory.mktemp("fusion-made-by-reference")
    jobs = [_reference_job(case, root, bases, seed) for seed, case in enumerate(CASES)]
    return root, run_reference(jobs)


def _our_fusion_model(base, fused: list[str], preset: str, seed: int) -> AdapterModel:
    model = AdapterModel(load_encoder(str(base)))
    for name in fused:
        add_adapter(model, name, AdapterConfig("pfeiffer", WIDTHS[name]))
        perturb(adapter_parameters(model, name), seed=seed, scale=0.2)
    add_fusion(model, TARGET, fused, FusionConfig.preset(preset))
    perturb(fusion_parameters(model, TARGET), seed=seed + 100, scale=0.1)
    pooling = default_pooling(model)
    labels = ["no", "maybe", "yes"]
    model.add_head(TARGET, HeadConfig(num_labels=3, label_names=labels, pooling=pooling))
    perturb(list(model.heads[TARGET].parameters()), seed=seed + 200, scale=0.3)
    set_active_fusion(model, TARGET)
    return model.eval()


@pytest.fixture(scope="module")
def loaded_by_reference(run_reference, bases, inputs, tmp_path_factory):
    """Our fusions and heads over our adapters, exported: adapters one folder each, the fusion
    run folder (fusion/ + head/) as one reference folder, as its save_adapter_fusion writes."""
    root = tmp_path_factory.mktemp("fusion-loaded-by-reference")
    ours, jobs = {}, []
    for seed, (case, (family, fused, preset)) in enumerate(CASES.items()):
        model = _our_fusion_model(bases[family], fused, preset, seed)
        ours[case] = (last_hidden(model.encoder_model, inputs), model(inputs).detach())
        folder = root / case
        for name in fused:
            save_adapter(model, name, folder / "ours" / name)
            export_adapterhub(folder / "ours" / name, folder / "ref" / name, torch_bin=True)
        save_fusion(model, TARGET, folder / "ours" / "run" / "fusion")
        save_head(model, TARGET, folder / "ours" / "run" / "head")
        export_adapterhub(folder / "ours" / "run", folder / "ref" / "fusion", torch_bin=True)
        load = {"adapters": [str(folder / "ref" / a) for a in fused]}
        load["fusion"] = str(folder / "ref" / "fusion")
        if case == "bert-dynamic-3":  # the head alone too, through load_head
            export_adapterhub(
                folder / "ours" / "run" / "head", folder / "ref" / "head", torch_bin=True
            )
            load["head"] = str(folder / "ref" / "head")
        jobs.append({"id": case, "base": str(bases[family]), "load": load, "activate": fused})
        jobs[-1]["head"] = TARGET
    return ours, run_reference(jobs)


@pytest.mark.parametrize("case", CASES)
def test_imported_fusion_and_head_compute_what_the_reference_computed(
    case, made_by_reference, bases, inputs, tmp_path
):
    root, reference = made_by_reference
    family, fused, preset = CASES[case]
    model = AdapterModel(load_encoder(str(bases[family])))
    for name in fused:
        load_adapter(model, import_adapterhub(root / case / name, tmp_path / name).directory)
    converted = import_adapterhub(root / case / "fusion", tmp_path / "fusion")
    assert (converted.fusion, converted.head, converted.fused) == (TARGET, TARGET, tuple(fused))
    set_active_fusion(model, load_fusion(model, converted.directory))
    model.select_head(load_head(model, converted.directory))
    assert fusion_setups(model)[TARGET].config == FusionConfig.preset(preset)
    model.eval()
    hidden = last_hidden(model.encoder_model, inputs)
    assert_same_output(hidden, reference[f"{case}.hidden"], reference[f"{case}.plain"])
    logits = model(inputs).detach()
    assert_same_output(logits, reference[f"{case}.logits"])


@pytest.mark.parametrize("case", CASES)
def test_exported_fusion_and_head_compute_in_the_reference_what_they_compute_here(
    case, loaded_by_reference
):
    ours, reference = loaded_by_reference
    hidden, logits = ours[case]
    assert_same_output(hidden, reference[f"{case}.hidden"], reference[f"{case}.plain"])
    assert_same_output(logits, reference[f"{case}.logits"])
