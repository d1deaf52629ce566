"""Regression and multiple-choice heads against the real reference, both ways.

The reference's regression head is its classification head with one label; its multiple-choice
head scores each (context, choice) pair of a (rows, choices, tokens) batch. The reference saves an
adapter with such a head in one folder (`save_adapter` with its head); we import it and compute
its outputs. We export an adapter with our head (a regression head's label range folded into its
last layer); the reference loads it and gives our outputs, in the labels' units.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from helpers import perturb
from interop_support import TOLERANCE, assert_same_output, rel_error
from safetensors.torch import load_file

from adapterfleet.adapters import (
    HEAD_WEIGHTS,
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
    set_active_adapter,
)
from adapterfleet.adapters.architectures import default_pooling
from adapterfleet.interop import InteropError, export_adapterhub, import_adapterhub

NAME = "task"
CHOICES = 3
_SEQ_BN = {"mh_adapter": False, "output_adapter": True, "original_ln_before": True,
           "reduction_factor": 8, "non_linearity": "relu"}  # fmt: skip
_REGRESSION = {"num_labels": 1}
_MULTIPLE_CHOICE = {"type": "multiple_choice", "num_choices": CHOICES}

# case -> (family, the reference's head)
IMPORTS = {
    **{f"{family}-regression": (family, _REGRESSION) for family in ("bert", "distilbert", "gpt2")},
    "llama-regression": ("llama", _REGRESSION),
    **{
        f"{family}-multiple-choice": (family, _MULTIPLE_CHOICE)
        for family in ("bert", "roberta", "distilbert", "albert", "deberta-v2", "electra")
    },
}
# case -> (family, our head's settings; its pooling is the family's)
EXPORTS = {
    "bert-regression": ("bert", {"head_type": "regression", "num_labels": 1}),
    **{
        f"{family}-regression-range-{low:g}-{high:g}": (
            family, {"head_type": "regression", "num_labels": 1, "value_range": [low, high]}
        )
        for family, low, high in (
            ("bert", 0, 5), ("roberta", -1.0, 3.0), ("distilbert", 0, 5), ("gpt2", 0, 5),
            ("llama", 1, 10),
        )
    },
    **{
        f"{family}-multiple-choice": (
            family, {"head_type": "multiple_choice", "num_labels": CHOICES}
        )
        for family in ("bert", "roberta", "distilbert", "albert", "deberta-v2", "electra")
    },
}  # fmt: skip


@pytest.fixture(scope="module")
def choice_inputs() -> dict[str, torch.Tensor]:
    """Two questions of three (context, choice) pairs, eight tokens, some padded at the end."""
    generator = torch.Generator().manual_seed(11)
    ids = torch.randint(5, 100, (2, CHOICES, 8), generator=generator)
    mask = torch.ones_like(ids)
    for row, choice, pad in ((0, 1, 2), (1, 0, 4), (1, 2, 1)):
        mask[row, choice, -pad:] = 0
        ids[row, choice, -pad:] = 0
    return {"input_ids": ids, "attention_mask": mask}


def _inputs_of(case: str, inputs, choice_inputs) -> dict[str, torch.Tensor]:
    return choice_inputs if "multiple-choice" in case else inputs


@pytest.fixture(scope="module")
def made_by_reference(run_reference, bases, choice_inputs, tmp_path_factory):
    """The reference's random adapter and head of each case, saved together by `save_adapter`."""
    root = tmp_path_factory.mktemp("heads-made-by-reference")
    jobs = []
    for seed, (case, (family, head)) in enumerate(IMPORTS.items()):
        job = {
            "id": case,
            "base": str(bases[family]),
            "make": {
                "adapters": [{"name": NAME, "config": _SEQ_BN}],
                "head": {"name": NAME, **head},
                "seed": seed,
            },
            "save": {"adapters": {NAME: str(root / case)}},
            "activate": NAME,
            "head": NAME,
        }
        if "multiple-choice" in case:
            job["inputs"] = {k: v.tolist() for k, v in choice_inputs.items()}
        jobs.append(job)
    return root, run_reference(jobs)


def _our_model(base, settings: dict, seed: int) -> AdapterModel:
    """An adapter and a head with `settings`, pooling as the family's own model class does."""
    model = AdapterModel(load_encoder(str(base)))
    add_adapter(model, NAME, AdapterConfig("pfeiffer", 8))
    perturb(adapter_parameters(model, NAME), seed=seed, scale=0.2)
    model.add_head(NAME, HeadConfig(**{"pooling": default_pooling(model), **settings}))
    perturb(list(model.heads[NAME].parameters()), seed=seed + 100, scale=0.3)
    set_active_adapter(model, NAME)
    return model.eval()


@pytest.fixture(scope="module")
def loaded_by_reference(run_reference, bases, inputs, choice_inputs, tmp_path_factory):
    """Our adapter and head of each case, saved as a run saves them (adapter/, head/) and
    exported into one folder; our outputs, and the reference's after `load_adapter` of it."""
    root = tmp_path_factory.mktemp("heads-loaded-by-reference")
    ours, jobs = {}, []
    for seed, (case, (family, settings)) in enumerate(EXPORTS.items()):
        model = _our_model(bases[family], settings, seed)
        given = _inputs_of(case, inputs, choice_inputs)
        with torch.no_grad():
            ours[case] = model(given)
        save_adapter(model, NAME, root / case / "ours" / "adapter")
        save_head(model, NAME, root / case / "ours" / "head")
        export_adapterhub(root / case / "ours", root / case / "ref")
        job = {"id": case, "base": str(bases[family]), "activate": NAME, "head": NAME}
        job.update(load={"adapters": [str(root / case / "ref")]}, use_safetensors=True)
        job["inputs"] = {k: v.tolist() for k, v in given.items()}
        jobs.append(job)
    return ours, run_reference(jobs)


@pytest.mark.parametrize("case", IMPORTS)
def test_imported_head_computes_what_the_reference_computed(
    case, made_by_reference, bases, inputs, choice_inputs, tmp_path
):
    root, reference = made_by_reference
    family, head = IMPORTS[case]
    converted = import_adapterhub(root / case, tmp_path / "ours")
    assert (converted.adapter, converted.head) == (NAME, NAME)
    model = AdapterModel(load_encoder(str(bases[family])))
    set_active_adapter(model, load_adapter(model, converted.directory))
    model.select_head(load_head(model, converted.directory))
    config = model.heads[NAME].config
    if "multiple-choice" in case:
        assert (config.head_type, config.num_labels, config.label_names) == (
            "multiple_choice", CHOICES, [],
        )  # fmt: skip
    else:
        assert (config.head_type, config.value_range) == ("regression", None)
    assert config.pooling == default_pooling(model)
    with torch.no_grad():
        logits = model.eval()(_inputs_of(case, inputs, choice_inputs))
    assert_same_output(logits, reference[f"{case}.logits"])


@pytest.mark.parametrize("case", EXPORTS)
def test_exported_head_computes_in_the_reference_what_it_computes_here(case, loaded_by_reference):
    ours, reference = loaded_by_reference
    assert_same_output(ours[case], reference[f"{case}.logits"])


def test_exported_ranges_give_the_labels_units(loaded_by_reference):
    """The reference's outputs of a ranged head are in the labels' units, not the [0, 1] scale
    the last layer learns on: without the fold they would differ by the range's width."""
    ours, reference = loaded_by_reference
    for case in ("bert-regression-range-0-5", "llama-regression-range-1-10"):
        _, settings = EXPORTS[case]
        low, high = settings["value_range"]
        unfolded = (ours[case] - low) / (high - low)
        assert rel_error(unfolded, reference[f"{case}.logits"]) > 0.5


# --- without the reference: round trips and refusals -----------------------------------------

_RANGED = {"head_type": "regression", "num_labels": 1, "value_range": [0, 5]}


def _saved(base, settings: dict, folder: Path) -> Path:
    """Our adapter and head saved as a run saves them: `folder` with adapter/ and head/."""
    model = _our_model(base, settings, seed=0)
    save_adapter(model, NAME, folder / "adapter")
    save_head(model, NAME, folder / "head")
    return folder


def _outputs(base, folder: Path, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
    """What the adapter and head in `folder` (or its adapter/ and head/) compute."""
    model = AdapterModel(load_encoder(str(base)))
    adapter, head = (folder / k if (folder / k).is_dir() else folder for k in ("adapter", "head"))
    set_active_adapter(model, load_adapter(model, adapter))
    model.select_head(load_head(model, head))
    with torch.no_grad():
        return model.eval()(inputs)


def test_a_ranged_regression_head_comes_back_without_its_range_computing_the_same(
    bases, inputs, tmp_path
):
    """The reference's regression head has no range: the export folds it into the last layer,
    and the import of that file is a head without a range that gives the same numbers."""
    run = _saved(bases["bert"], _RANGED, tmp_path / "run")
    export_adapterhub(run, tmp_path / "ref")
    back = import_adapterhub(tmp_path / "ref", tmp_path / "back").directory
    config = json.loads((back / "head_config.json").read_text())["config"]
    assert (config["head_type"], config.get("value_range")) == ("regression", None)
    before, after = _outputs(bases["bert"], run, inputs), _outputs(bases["bert"], back, inputs)
    assert rel_error(after, before) < TOLERANCE


@pytest.mark.parametrize(
    "settings",
    [
        {"head_type": "regression", "num_labels": 1},
        {"head_type": "multiple_choice", "num_labels": CHOICES},
        {"head_type": "multiple_choice", "num_labels": 2, "label_names": ["yes", "no"]},
    ],
)
def test_regression_and_multiple_choice_heads_come_back_as_they_were(bases, tmp_path, settings):
    run = _saved(bases["distilbert"], settings, tmp_path / "run")
    export_adapterhub(run, tmp_path / "ref")
    back = import_adapterhub(tmp_path / "ref", tmp_path / "back").directory
    mine = json.loads((run / "head" / "head_config.json").read_text())["config"]
    assert json.loads((back / "head_config.json").read_text())["config"] == mine
    before, after = load_file(run / "head" / HEAD_WEIGHTS), load_file(back / HEAD_WEIGHTS)
    assert before.keys() == after.keys()
    assert all(torch.equal(before[k], after[k]) for k in before)


def test_a_multiple_choice_head_on_a_decoder_is_refused(bases, tmp_path):
    """AdapterHub's decoder model classes (GPT2AdapterModel, ...) have no multiple-choice head."""
    run = _saved(bases["gpt2"], {"head_type": "multiple_choice", "num_labels": 2}, tmp_path / "r")
    with pytest.raises(InteropError) as caught:
        export_adapterhub(run, tmp_path / "out")
    assert str(caught.value) == (
        f"{run / 'head'}: a multiple-choice head cannot be exported on this model: the "
        "reference's GPT2AdapterModel has no multiple-choice head; export the adapter or fusion "
        "alone (--no-head)"
    )
    assert not (tmp_path / "out").exists()


def test_a_range_that_cannot_be_folded_is_refused(bases, tmp_path):
    model = _our_model(bases["bert"], {**_RANGED, "value_range": [0, 1e38]}, seed=0)
    with torch.no_grad():
        model.heads[NAME].layers[-1].weight.fill_(10.0)  # times 1e38: past float32's 3.4e38
    save_head(model, NAME, tmp_path / "head")
    with pytest.raises(InteropError, match=r"value_range \[0, 1e\+38\] cannot be folded into "):
        export_adapterhub(tmp_path / "head", tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_a_head_the_reference_cannot_pool_is_refused_and_no_head_exports_the_adapter(
    bases, tmp_path
):
    """The refusal said "export the adapter alone", which no option did."""
    settings = {"head_type": "regression", "num_labels": 1, "pooling": "mean"}
    run = _saved(bases["bert"], settings, tmp_path / "run")
    with pytest.raises(InteropError) as caught:
        export_adapterhub(run, tmp_path / "out")
    assert str(caught.value).endswith(
        "the reference's heads on this model pool 'cls'; export the adapter or fusion alone "
        "(--no-head)"
    )
    converted = export_adapterhub(run, tmp_path / "out", head=False)
    assert (converted.adapter, converted.head) == (NAME, None)
    written = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert written == ["adapter.safetensors", "adapter_config.json"]
