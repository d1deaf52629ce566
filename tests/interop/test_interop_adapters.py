"""Bottleneck adapters against the real reference (AdapterHub `adapters` 1.3.0), both ways.

Every family and both placements: the reference saves random adapters, we import them and compute
its outputs; we export random adapters, the reference loads them and computes ours. An imported
adapter also passes our normal load path with its hash checked, and registers like a trained one.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import perturb
from interop_support import FAMILIES, REF_FAMILIES, assert_same_output, last_hidden

from adapterfleet.adapters import (
    ADAPTER_WEIGHTS,
    AdapterConfig,
    adapter_configs,
    adapter_parameters,
    add_adapter,
    load_adapter,
    load_encoder,
    save_adapter,
    set_active_adapter,
    sha256_file,
)
from adapterfleet.interop import export_adapterhub, import_adapterhub

_HOULSBY_GELU = {  # a full config dict, as a user passes one to add_adapter
    "mh_adapter": True,
    "output_adapter": True,
    "original_ln_before": False,
    "reduction_factor": 8,
    "non_linearity": "gelu",
}
_PFEIFFER_TANH = {
    "mh_adapter": False,
    "output_adapter": True,
    "original_ln_before": True,
    "reduction_factor": 4,
    "non_linearity": "tanh",
}

# case -> (family, the reference's config, our placement, extra job settings)
IMPORTS = {
    **{
        f"{family}-{config}": (family, config, placement, {})
        for family in FAMILIES + REF_FAMILIES
        for config, placement in (("seq_bn", "pfeiffer"), ("double_seq_bn", "houlsby"))
    },
    "roberta-dict-gelu-rf8": ("roberta", _HOULSBY_GELU, "houlsby", {}),
    "distilbert-dict-tanh-safetensors": ("distilbert", _PFEIFFER_TANH, "pfeiffer",
                                         {"use_safetensors": True}),
    "bert-plain-model": ("bert", "double_seq_bn", "houlsby", {"plain": True}),
}  # fmt: skip

# case -> (family, our config, extra job settings, torch_bin)
EXPORTS = {
    **{
        f"{family}-{placement}": (family, AdapterConfig(placement), {}, True)
        for family in FAMILIES + REF_FAMILIES
        for placement in ("pfeiffer", "houlsby")
    },
    "bert-pfeiffer-gelu-rf4-safetensors": (
        "bert", AdapterConfig("pfeiffer", 4, "gelu"), {"use_safetensors": True}, False
    ),
    "distilbert-houlsby-tanh-rf8": ("distilbert", AdapterConfig("houlsby", 8, "tanh"), {}, True),
}  # fmt: skip


@pytest.fixture(scope="module")
def made_by_reference(run_reference, bases, tmp_path_factory):
    """The reference's random adapters, saved; and its outputs with each one active."""
    root = tmp_path_factory.mktemp("made-by-reference")
    jobs = []
    for seed, (case, (family, config, _, extra)) in enumerate(IMPORTS.items()):
        jobs.append(
            {
                "id": case,
                "base": str(bases[family]),
                "make": {"adapters": [{"name": "task", "config": config}], "seed": seed},
                "save": {"adapters": {"task": str(root / case)}},
                "activate": "task",
                **extra,
            }
        )
    return root, run_reference(jobs)


@pytest.fixture(scope="module")
def loaded_by_reference(run_reference, bases, inputs, tmp_path_factory):
    """Our random adapters, exported; our outputs, and the reference's after loading them."""
    root = tmp_path_factory.mktemp("loaded-by-reference")
    ours, jobs = {}, []
    for seed, (case, (family, config, extra, torch_bin)) in enumerate(EXPORTS.items()):
        model = load_encoder(str(bases[family]))
        add_adapter(model, "task", config)
        perturb(adapter_parameters(model, "task"), seed=seed, scale=0.2)
        set_active_adapter(model, "task")
        ours[case] = last_hidden(model, inputs)
        save_adapter(model, "task", root / case / "ours")
        export_adapterhub(root / case / "ours", root / case / "ref", torch_bin=torch_bin)
        load = {"adapters": [str(root / case / "ref")]}
        jobs.append({"id": case, "base": str(bases[family]), "load": load, "activate": "task"})
        jobs[-1].update(extra)
    return ours, run_reference(jobs)


@pytest.mark.parametrize("case", IMPORTS)
def test_imported_adapter_computes_what_the_reference_computed(
    case, made_by_reference, bases, inputs, tmp_path
):
    root, reference = made_by_reference
    family, _, placement, _ = IMPORTS[case]
    converted = import_adapterhub(root / case, tmp_path / "ours")
    assert converted.adapter == "task" and converted.head is None and converted.fusion is None
    model = load_encoder(str(bases[family]))
    weights = tmp_path / "ours" / ADAPTER_WEIGHTS
    name = load_adapter(model, converted.directory, sha256=sha256_file(weights))
    set_active_adapter(model, name)
    assert adapter_configs(model)[name].architecture == placement
    assert_same_output(
        last_hidden(model, inputs), reference[f"{case}.hidden"], reference[f"{case}.plain"]
    )


@pytest.mark.parametrize("case", EXPORTS)
def test_exported_adapter_computes_in_the_reference_what_it_computes_here(
    case, loaded_by_reference
):
    ours, reference = loaded_by_reference
    assert_same_output(ours[case], reference[f"{case}.hidden"], reference[f"{case}.plain"])


def test_imported_adapter_registers_and_pulls_like_a_trained_one(
    made_by_reference, bases, inputs, tmp_path
):
    """The registry path of a trained adapter: log the folder as a run's `adapter` artifact,
    register it with its hash, pull it back verified, load it with the hash checked."""
    from adapterfleet.registry import (
        adapter_model_name,
        default_tracking_uri,
        ensure_experiment,
        open_trial_run,
        pull,
        register_version,
    )

    root, reference = made_by_reference
    converted = import_adapterhub(root / "bert-seq_bn", tmp_path / "imported" / "adapter")
    uri = default_tracking_uri(tmp_path / "mlflow")
    run = open_trial_run(uri, ensure_experiment(uri, "interop"), None, "imported-bert-seq_bn")
    run.log_artifacts(converted.directory, "adapter")
    run.end()
    weights = converted.directory / ADAPTER_WEIGHTS
    tags = {"source": "adapterhub", "task": "task", "architecture": "pfeiffer"}
    info = register_version(
        uri, adapter_model_name("interop", "task"), run.run_id, "adapter", weights, tags
    )
    assert info.sha256 == sha256_file(weights) and "best" in info.aliases
    pulled = pull(uri, info.name, tmp_path / "pulled")
    model = load_encoder(str(bases["bert"]))
    set_active_adapter(model, load_adapter(model, pulled, sha256=info.sha256))
    case = "bert-seq_bn"
    assert_same_output(
        last_hidden(model, inputs), reference[f"{case}.hidden"], reference[f"{case}.plain"]
    )


def test_import_then_export_gives_back_the_reference_tensors(made_by_reference, tmp_path):
    """Both directions compose to the identity on the weights (names and values)."""
    import torch

    root, _ = made_by_reference
    source = Path(root / "bert-double_seq_bn")
    import_adapterhub(source, tmp_path / "ours")
    export_adapterhub(tmp_path / "ours", tmp_path / "back", torch_bin=True)
    before = torch.load(source / "pytorch_adapter.bin", weights_only=True)
    after = torch.load(tmp_path / "back" / "pytorch_adapter.bin", weights_only=True)
    assert sorted(before) == sorted(after)
    assert all(torch.equal(before[k], after[k]) for k in before)
