"""What import and export refuse, in one line naming the field, and what they accept; without the
reference's virtualenv: the reference-format folders here are our own exports, edited."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from helpers import tiny_encoder
from safetensors.torch import load_file

from adapterfleet.adapters import (
    ADAPTER_WEIGHTS,
    HEAD_WEIGHTS,
    AdapterConfig,
    AdapterModel,
    adapter_configs,
    add_adapter,
    load_encoder,
    save_adapter,
)
from adapterfleet.fusion import FUSION_WEIGHTS, FusionConfig, read_fusion_config
from adapterfleet.interop import InteropError, export_adapterhub, import_adapterhub


def _edited(exported: Path, tmp_path: Path, config_file: str, keep: tuple[str, ...], **changes):
    """A copy of the exported folder with only the files of one module, and `changes` applied to
    the `config` entry of its config file (`top` changes the file's own keys)."""
    folder = tmp_path / "edited"
    folder.mkdir(parents=True)
    for name in (config_file, *keep):
        shutil.copy(exported / name, folder / name)
    meta = json.loads((folder / config_file).read_text())
    top = changes.pop("top", {})
    if isinstance(meta["config"], dict):
        meta["config"].update(changes)
    meta.update(top)
    (folder / config_file).write_text(json.dumps(meta))
    return folder


NO_BASE = "/no/such/base-model"  # settings are refused before a base model is loaded
ADAPTER = ("adapter_config.json", ("pytorch_adapter.bin",))
FUSION = ("adapter_fusion_config.json", ("pytorch_model_adapter_fusion.bin",))
HEAD = ("head_config.json", ("pytorch_model_head.bin",))


def _refused(folder: Path, out: Path, *words: str, base: str | None = None) -> str:
    with pytest.raises(InteropError) as caught:
        import_adapterhub(folder, out, base)
    message = str(caught.value)
    assert "\n" not in message
    assert all(word in message for word in words), message
    assert not out.exists(), "a refused import wrote files"
    return message


@pytest.mark.parametrize(
    ("changes", "words"),
    [
        ({"phm_layer": True}, ["config.phm_layer=True"]),
        ({"scaling": 2.0}, ["config.scaling=2.0"]),
        ({"scaling": "learned"}, ["config.scaling='learned'"]),
        ({"ln_after": True}, ["config.ln_after=True"]),
        ({"ln_before": True}, ["config.ln_before=True"]),
        ({"adapter_residual_before_ln": True}, ["config.adapter_residual_before_ln"]),
        ({"original_ln_before": False}, ["config.original_ln_before=False", "seq_bn"]),
        ({"original_ln_after": False}, ["config.original_ln_after=False"]),
        ({"residual_before_ln": "post_add"}, ["config.residual_before_ln='post_add'"]),
        ({"is_parallel": True}, ["config.is_parallel=True"]),
        ({"use_gating": True}, ["config.use_gating=True"]),
        ({"leave_out": [0]}, ["config.leave_out=[0]"]),
        ({"dropout": 1.5}, ["config.dropout=1.5"]),
        ({"inv_adapter": "nice"}, ["config.inv_adapter='nice'"]),
        ({"stochastic_depth": 0.1}, ["config.stochastic_depth=0.1"]),
        ({"some_new_switch": 3}, ["config.some_new_switch=3", "not a setting"]),
        ({"reduction_factor": {"default": 16}}, ["config.reduction_factor", "per-layer"]),
        ({"reduction_factor": 1.5}, ["config.reduction_factor=1.5", "integer"]),
        ({"reduction_factor": 5}, ["config.reduction_factor=5", "hidden size 32"]),
        ({"non_linearity": "leakyrelu"}, ["config.non_linearity='leakyrelu'"]),
        ({"mh_adapter": True, "output_adapter": False}, ["config.mh_adapter=True"]),
        ({"architecture": "lora"}, ["config.architecture='lora'"]),
    ],
)
def test_unsupported_adapter_settings_are_refused_naming_the_field(
    exported, tmp_path, changes, words
):
    folder = _edited(exported, tmp_path, ADAPTER[0], ADAPTER[1], **changes)
    _refused(folder, tmp_path / "out", "adapter_config.json", *words, base=NO_BASE)


def test_a_legacy_config_means_gelu_new_by_gelu(exported, tmp_path):
    folder = _edited(exported, tmp_path, *ADAPTER, non_linearity="gelu")
    meta = json.loads((folder / ADAPTER[0]).read_text())
    del meta["version"]
    (folder / ADAPTER[0]).write_text(json.dumps(meta))
    _refused(folder, tmp_path / "out", "config.non_linearity='gelu'", "gelu_new")
    meta["config"]["non_linearity"] = "gelu_orig"  # the legacy name of the exact gelu
    (folder / ADAPTER[0]).write_text(json.dumps(meta))
    import_adapterhub(folder, tmp_path / "out")
    assert (
        json.loads((tmp_path / "out" / "adapter_config.json").read_text())["config"][
            "non_linearity"
        ]
        == "gelu"
    )


def test_config_names_old_and_new_are_understood(exported, tmp_path):
    for name in ("pfeiffer", "seq_bn"):
        folder = _edited(exported, tmp_path / name, *ADAPTER, top={"config": name})
        converted = import_adapterhub(folder, tmp_path / name / "out")
        saved = json.loads((converted.directory / "adapter_config.json").read_text())
        assert saved["config"]["architecture"] == "pfeiffer"
        assert saved["config"]["reduction_factor"] == 16
    folder = _edited(exported, tmp_path / "h", *ADAPTER, top={"config": "houlsby"})
    _refused(folder, tmp_path / "h" / "out", "does not hold what the config describes")
    folder = _edited(exported, tmp_path / "l", *ADAPTER, top={"config": "lora"})
    _refused(folder, tmp_path / "l" / "out", "config 'lora' is not supported")


def test_a_base_of_another_size_or_family_is_refused(exported, bases, tmp_path):
    wide = tmp_path / "wide-bert"
    tiny_encoder("bert", hidden_size=64).save_pretrained(wide)
    folder = _edited(exported, tmp_path, *ADAPTER)
    with pytest.raises(InteropError, match="hidden_size=32.*hidden_size=64"):
        import_adapterhub(folder, tmp_path / "out", wide)
    with pytest.raises(InteropError, match="model_type='bert'.*model_type='roberta'"):
        import_adapterhub(folder, tmp_path / "out", str(bases["roberta"]))
    deep = tmp_path / "deep-bert"
    tiny_encoder("bert", num_hidden_layers=3).save_pretrained(deep)
    with pytest.raises(InteropError, match="modules for 2 layers, but this model has 3 "):
        import_adapterhub(folder, tmp_path / "out", deep)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("changes", "words"),
    [
        ({"temperature": True}, ["config.temperature=True"]),
        ({"residual_before": True}, ["config.residual_before=True"]),
        ({"query_before_ln": True}, ["config.query_before_ln=True"]),
        ({"query": False, "key": False, "value": False}, ["query, key and value are all false"]),
    ],
)
def test_unsupported_fusion_settings_are_refused(exported, tmp_path, changes, words):
    folder = _edited(exported, tmp_path, *FUSION, **changes)
    _refused(folder, tmp_path / "out", "adapter_fusion_config.json", *words, base=NO_BASE)


def test_fusion_preset_names_are_understood(exported, tmp_path):
    folder = _edited(exported, tmp_path / "d", *FUSION, top={"config": "dynamic"})
    converted = import_adapterhub(folder, tmp_path / "d" / "out")
    assert read_fusion_config(converted.directory)[2] == FusionConfig.preset("dynamic")
    folder = _edited(exported, tmp_path / "s", *FUSION, top={"config": "static"})
    _refused(folder, tmp_path / "s" / "out", "unexpected", "value.weight")


@pytest.mark.parametrize(
    ("changes", "words"),
    [
        ({"layers": 1}, ["config.layers=1"]),
        ({"activation_function": "relu"}, ["config.activation_function='relu'"]),
        ({"use_pooler": True}, ["config.use_pooler=True"]),
        ({"head_type": "tagging"}, ["config.head_type='tagging'", "'multiple_choice' heads"]),
        ({"head_type": "multiple_choice"}, ["config.num_choices=None", "2 or more choices"]),
        ({"head_type": "multiple_choice", "num_choices": 3, "layers": 1}, ["multiple-choice"]),
        ({"num_labels": 0}, ["config.num_labels=0", "1 label (regression) or more"]),
    ],
)
def test_heads_of_other_shapes_are_refused(exported, tmp_path, changes, words):
    folder = _edited(exported, tmp_path, *HEAD, **changes)
    _refused(folder, tmp_path / "out", "head_config.json", *words, base=NO_BASE)


def test_broken_or_foreign_folders_are_refused(ours, exported, tmp_path):
    _refused(ours / "run" / "adapter", tmp_path / "a", "written by adapterfleet")
    (tmp_path / "empty").mkdir()
    _refused(tmp_path / "empty", tmp_path / "b", "holds none of", "adapter_config.json")
    no_weights = _edited(exported, tmp_path / "nw", ADAPTER[0], ())
    _refused(no_weights, tmp_path / "c", "neither adapter.safetensors nor pytorch_adapter.bin")
    corrupt = _edited(exported, tmp_path / "cw", *ADAPTER)
    (corrupt / "pytorch_adapter.bin").write_bytes(b"not a zip file")
    message = _refused(corrupt, tmp_path / "d", "cannot read the weights", "not a file of tensors")
    assert "weights_only=False" not in message  # torch's advice would run the file's code
    pickled = _edited(exported, tmp_path / "pk", *ADAPTER)
    torch.save({"w": Path("/")}, pickled / "pytorch_adapter.bin")  # not tensors only
    message = _refused(pickled, tmp_path / "e", "cannot read the weights", "PosixPath")
    assert "use_safetensors=True" in message and "weights_only=False" not in message
    message = _refused(exported, tmp_path / "g", NO_BASE, base=NO_BASE)
    assert message == (  # was "(Repo id must be in the form 'repo_name' or ...)"
        f"base model {NO_BASE} is not a folder on this machine; give a local folder "
        "(config.json, the weights, the tokenizer), a hub id, or minilm-l6 (--base-model)"
    )
    with pytest.raises(InteropError, match="is a file, not a folder on this machine"):
        import_adapterhub(exported, tmp_path / "h", exported / ADAPTER[0])
    with pytest.raises(InteropError, match="is the source directory"):
        import_adapterhub(exported, exported)
    with pytest.raises(InteropError, match="not written by adapterfleet"):
        export_adapterhub(exported, tmp_path / "f")


def test_export_refuses_a_run_that_fine_tuned_its_encoder(ours, tmp_path):
    """A full (or MT-A) run's head scores right only on its model/, which an export does not
    carry: it used to be exported alone, recording the original base."""
    full = Path(shutil.copytree(ours / "run", tmp_path / "full"))
    shutil.rmtree(full / "adapter")
    shutil.rmtree(full / "fusion")
    (full / "model").mkdir()  # what `train --mode full` writes beside head/
    with pytest.raises(InteropError, match=r"fine-tuned its encoder \(its model/ folder\)"):
        export_adapterhub(full, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_export_refuses_what_the_reference_cannot_express(ours, tmp_path):
    for field, value, words in [
        ("temperature", 2.0, "temperature 2.0"),
        ("regularization_lambda", 0.05, "regularization_lambda 0.05"),
        ("dropout", 0.0, "dropout 0.0"),
    ]:
        folder = tmp_path / field
        shutil.copytree(ours / "run" / "fusion", folder)
        meta = json.loads((folder / "adapter_fusion_config.json").read_text())
        meta["config"][field] = value
        (folder / "adapter_fusion_config.json").write_text(json.dumps(meta))
        model = AdapterModel(load_encoder(meta["base_model"]["name_or_path"]))
        with pytest.raises(InteropError, match=words):
            export_adapterhub(folder, tmp_path / f"{field}-out", model)
        assert adapter_configs(model) == {}, "the caller's model was left with stand-ins"


def test_a_family_adapterhub_lacks_is_named_as_adapterhubs_gap(tmp_path):
    """Qwen2 is one of adapterfleet's families but not one of AdapterHub 1.3's; the line said
    adapterfleet did not support it, listing the families both have as adapterfleet's."""
    model = AdapterModel(tiny_encoder("qwen2"))
    add_adapter(model, "a", AdapterConfig("pfeiffer", 4))
    save_adapter(model, "a", tmp_path / "a")
    with pytest.raises(InteropError) as caught:
        export_adapterhub(tmp_path / "a", tmp_path / "out", model)
    assert str(caught.value) == (
        "the base model: AdapterHub adapters 1.3.0 has no model type 'qwen2' (of adapterfleet's "
        "families it has albert, bert, deberta, deberta-v2, distilbert, electra, gpt2, llama, "
        "mistral, roberta, xlm-roberta); adapters on this base are used in adapterfleet's own "
        "format, not converted"
    )
    assert not (tmp_path / "out").exists()


def test_export_then_import_gives_back_our_files(ours, exported, tmp_path):
    """Both directions compose to the identity: same tensors, same configs."""
    back = import_adapterhub(exported, tmp_path / "back")
    assert (back.adapter, back.head, back.fusion, back.fused) == ("a", "t", "t", ("a", "b"))
    for folder, weights in (("adapter", ADAPTER_WEIGHTS), ("head", HEAD_WEIGHTS)):
        before = load_file(ours / "run" / folder / weights)
        after = load_file(back.directory / weights)
        assert before.keys() == after.keys()
        assert all(torch.equal(before[k], after[k]) for k in before)
    before = load_file(ours / "run" / "fusion" / FUSION_WEIGHTS)
    after = load_file(back.directory / FUSION_WEIGHTS)
    assert all(torch.equal(before[k], after[k]) for k in before)
    fused = read_fusion_config(ours / "run" / "fusion")[1:3]
    assert read_fusion_config(back.directory)[1:3] == fused
    for name in ("adapter_config.json", "head_config.json"):
        mine = json.loads((ours / "run" / name.split("_")[0] / name).read_text())
        again = json.loads((back.directory / name).read_text())
        assert again["config"] == mine["config"]


def test_a_callers_model_gets_back_what_it_had(exported, bases, tmp_path):
    model = load_encoder(str(bases["bert"]))
    add_adapter(model, "mine", AdapterConfig("houlsby", 8))
    import_adapterhub(exported, tmp_path / "out", model)
    assert list(adapter_configs(model)) == ["mine"]


def test_without_torch_bin_only_safetensors_are_written(ours, tmp_path):
    export_adapterhub(ours / "run", tmp_path / "ref", torch_bin=False)
    names = sorted(p.name for p in (tmp_path / "ref").iterdir())
    assert names == [
        "adapter.safetensors",
        "adapter_config.json",
        "adapter_fusion_config.json",
        "head_config.json",
        "model_adapter_fusion.safetensors",
        "model_head.safetensors",
    ]
    head = json.loads((tmp_path / "ref" / "head_config.json").read_text())
    assert head["model_class"] == "BertAdapterModel"
    assert head["config"]["label2id"] == {"x": 0, "y": 1, "z": 2}
    assert head["config"]["dropout_prob"] == 0.2
    back = import_adapterhub(tmp_path / "ref", tmp_path / "back")  # from the safetensors files
    assert back.adapter == "a"


def test_a_training_dropout_is_dropped_with_a_warning_and_the_weights_kept(exported, tmp_path):
    """Refused before with no fix, though the reference applies it in training only; the
    adapter imported with it holds the same weights as the one imported without."""
    folder = _edited(exported, tmp_path, *ADAPTER, dropout=0.1)
    with pytest.warns(UserWarning, match=r"config.dropout=0.1 is dropped: it acts in training"):
        import_adapterhub(folder, tmp_path / "with")
    plain = _edited(exported, tmp_path / "plain", *ADAPTER)
    import_adapterhub(plain, tmp_path / "without")
    weights = "adapter.safetensors"
    assert (tmp_path / "with" / weights).read_bytes() == (
        tmp_path / "without" / weights
    ).read_bytes()


def test_a_hub_id_that_cannot_be_loaded_offline_says_so(tmp_path):
    """`export --base-model my-org/tiny-llama` on a machine without the hub said `pass the
    base model (--base-model)`, which had been passed."""
    from adapterfleet._hub import hub_unreachable
    from adapterfleet.interop.adapterhub import _load_base

    with pytest.raises(InteropError) as refused:
        _load_base("no-such-org/no-such-model-af")
    message = str(refused.value)
    assert message.startswith("cannot load the base model 'no-such-org/no-such-model-af' (")
    fix = "; give --base-model a local folder of it, or a hub id in the cache (HF_HOME)"
    assert message.endswith(fix), message  # it said "pass the base model (--base-model)"
    if hub_unreachable() is not None:
        assert "does not resolve (no network?), and it is not in the Hugging Face cache" in message
