import json
from pathlib import Path

import pytest
import torch
from helpers import batch, hidden, perturb, tiny_encoder
from safetensors.torch import load_file

from adapterfleet.adapters import (
    AdapterConfig,
    AdapterModel,
    HeadConfig,
    WeightsFileError,
    adapter_configs,
    adapter_parameters,
    add_adapter,
    load_adapter,
    load_head,
    save_adapter,
    save_head,
    set_active_adapter,
    sha256_file,
)


@pytest.fixture
def trained(tmp_path):
    model = tiny_encoder("bert")
    add_adapter(model, "rte", AdapterConfig(architecture="houlsby", reduction_factor=8))
    perturb(adapter_parameters(model, "rte"))
    set_active_adapter(model, "rte")
    save_adapter(model, "rte", tmp_path / "rte")
    return model, tmp_path / "rte"


def test_round_trip_reproduces_outputs_exactly(trained):
    model, directory = trained
    fresh = tiny_encoder("bert")
    assert load_adapter(fresh, directory) == "rte"
    set_active_adapter(fresh, "rte")
    inputs = batch()
    assert torch.equal(hidden(fresh, inputs), hidden(model, inputs))
    assert adapter_configs(fresh)["rte"] == adapter_configs(model)["rte"]


def test_only_adapter_weights_are_written(trained):
    model, directory = trained
    assert sorted(p.name for p in directory.iterdir()) == [
        "adapter.safetensors",
        "adapter_config.json",
    ]
    tensors = load_file(directory / "adapter.safetensors")
    assert sum(t.numel() for t in tensors.values()) == sum(
        p.numel() for p in adapter_parameters(model, "rte")
    )
    assert all(key.startswith("layers.") and ".adapter_" in key for key in tensors)


def test_hash_is_checked_and_a_mismatch_leaves_the_model_unchanged(trained):
    _, directory = trained
    fresh = tiny_encoder("bert")
    digest = sha256_file(directory / "adapter.safetensors")
    load_adapter(fresh, directory, name="ok", sha256=digest)
    with pytest.raises(WeightsFileError, match="sha256"):
        load_adapter(fresh, directory, name="bad", sha256="0" * 64)
    assert sorted(adapter_configs(fresh)) == ["ok"]


def test_corrupt_or_missing_files_fail_clearly(trained, tmp_path):
    _, directory = trained
    fresh = tiny_encoder("bert")
    with pytest.raises(WeightsFileError, match="missing"):
        load_adapter(fresh, tmp_path / "nowhere")
    (directory / "adapter.safetensors").write_bytes(b"\x00garbage")
    with pytest.raises(WeightsFileError, match="safetensors"):
        load_adapter(fresh, directory)
    (directory / "adapter_config.json").write_text("{not json")
    with pytest.raises(WeightsFileError, match="JSON"):
        load_adapter(fresh, directory)
    assert adapter_configs(fresh) == {}


@pytest.mark.parametrize(
    ("family", "overrides", "field"),
    [
        ("bert", {"hidden_size": 48, "num_attention_heads": 4}, "hidden_size"),
        ("bert", {"num_hidden_layers": 3}, "num_hidden_layers"),
        ("roberta", {}, "model_type"),
    ],
)
def test_adapter_from_another_base_is_refused(trained, family, overrides, field):
    _, directory = trained
    other = tiny_encoder(family, **overrides)
    with pytest.raises(WeightsFileError, match=field):
        load_adapter(other, directory)


def test_edited_shapes_are_refused(trained):
    _, directory = trained
    config = json.loads((directory / "adapter_config.json").read_text())
    config["config"]["reduction_factor"] = 4
    (directory / "adapter_config.json").write_text(json.dumps(config))
    with pytest.raises(WeightsFileError, match="shape"):
        load_adapter(tiny_encoder("bert"), directory)


def test_head_round_trip(tmp_path):
    model = AdapterModel(tiny_encoder("bert"))
    model.add_head("rte", HeadConfig(num_labels=2, label_names=["entailment", "not_entailment"]))
    perturb(list(model.heads["rte"].parameters()))
    model.eval()
    save_head(model, "rte", tmp_path / "head")
    assert sorted(p.name for p in (tmp_path / "head").iterdir()) == [
        "head_config.json",
        "model_head.safetensors",
    ]
    other = AdapterModel(tiny_encoder("bert"))
    assert load_head(other, tmp_path / "head") == "rte"
    other.eval()
    inputs = batch()
    assert torch.equal(other(inputs), model(inputs))
    assert other.heads["rte"].config.label_names == ["entailment", "not_entailment"]


def test_base_model_saves_without_adapters_and_reloads(tmp_path):
    from transformers import AutoModel

    from adapterfleet.adapters import save_base_model

    model = tiny_encoder("bert")
    add_adapter(model, "p", AdapterConfig(reduction_factor=4))
    add_adapter(model, "h", AdapterConfig(architecture="houlsby", reduction_factor=4))
    perturb(list(model.parameters()), scale=0.01)
    set_active_adapter(model, None)
    save_base_model(model, tmp_path / "base")
    reloaded = AutoModel.from_pretrained(tmp_path / "base").eval()
    inputs = batch()
    assert torch.equal(hidden(reloaded, inputs), hidden(model, inputs))
    assert not any("adapter" in key for key in load_file(tmp_path / "base" / "model.safetensors"))


def test_head_with_another_label_count_is_refused_and_not_added(tmp_path):
    model = AdapterModel(tiny_encoder("bert"))
    model.add_head("rte", HeadConfig(num_labels=2, label_names=["entailment", "not_entailment"]))
    save_head(model, "rte", tmp_path / "head")
    config = json.loads((tmp_path / "head" / "head_config.json").read_text())
    config["config"].update(num_labels=3, label_names=["a", "b", "c"])
    (tmp_path / "head" / "head_config.json").write_text(json.dumps(config))
    other = AdapterModel(tiny_encoder("bert"))
    with pytest.raises(WeightsFileError, match="shape"):
        load_head(other, tmp_path / "head")
    assert "rte" not in other.heads


def test_weights_and_a_replaced_run_folder_take_the_umask_mode(tmp_path: Path) -> None:
    """mkstemp/mkdtemp made every weights file 0600 and a replaced run folder 0700, whatever
    the umask: on shared storage no other account of the group could read a trained adapter."""
    import subprocess
    import sys

    code = """
import os, sys
from pathlib import Path
import torch
os.umask(0o027)
from adapterfleet.adapters.files import write_weights
from adapterfleet.orchestration.run_folder import fresh_run_dir
out = Path(sys.argv[1]) / "run"
out.mkdir()
(out / "run.json").write_text("{}")
with fresh_run_dir(out) as staging:
    write_weights(staging / "adapter", "c.json", {}, "w.safetensors", {"x": torch.zeros(1)})
    (staging / "run.json").write_text("{}")
"""
    subprocess.run([sys.executable, "-c", code, str(tmp_path)], check=True, timeout=120)
    run = tmp_path / "run"
    modes = {p.relative_to(run).as_posix(): p.stat().st_mode & 0o777 for p in run.rglob("*")}
    assert run.stat().st_mode & 0o777 == 0o750
    assert modes == {
        "adapter": 0o750,
        "adapter/c.json": 0o640,
        "adapter/w.safetensors": 0o640,
        "run.json": 0o640,
    }
