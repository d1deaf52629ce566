"""What is checked of a base model before anything trains on it (`adapters/base_checks.py`), on
real saved checkpoints: a config.json that does not match the weights, a pickle that holds more
than tensors, a safetensors file cut short, an encoder-decoder model; and the checkpoints that
have to pass: every family saved by its own `save_pretrained`, task models' checkpoints (a
prefix, no pooler, tied embeddings), shards, the packaged MiniLM."""

from __future__ import annotations

import json
import pathlib
from pathlib import Path

import pytest
import torch
import transformers
from helpers import ALL_FAMILIES, tiny_encoder
from safetensors.torch import load_file

from adapterfleet.adapters import BaseModelError, load_encoder
from adapterfleet.adapters.base_checks import check_checkpoint, checkpoint_names
from adapterfleet.adapters.base_model import packaged_minilm_path

SMALL = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
         "intermediate_size": 64, "vocab_size": 100}  # fmt: skip


def _check(folder: Path) -> None:
    """Both checks: the one before a run starts (file headers), and the load."""
    check_checkpoint(str(folder), folder, transformers.AutoConfig.from_pretrained(folder))
    load_encoder(str(folder))


def _refused(folder: Path, capfd: pytest.CaptureFixture[str]) -> str:
    """The refusal of both checks: one line, the same, with no LOAD REPORT printed."""
    config = transformers.AutoConfig.from_pretrained(folder)
    with pytest.raises(BaseModelError) as before:
        check_checkpoint(str(folder), folder, config)
    with pytest.raises(BaseModelError) as loading:
        load_encoder(str(folder))
    message = str(before.value)
    assert str(loading.value) == message and "\n" not in message
    assert "LOAD REPORT" not in capfd.readouterr().err
    return message


@pytest.fixture
def bert(tmp_path: Path) -> Path:
    tiny_encoder("bert").save_pretrained(tmp_path / "bert")
    return tmp_path / "bert"


@pytest.mark.parametrize("family", ALL_FAMILIES)
def test_every_family_saved_by_save_pretrained_passes(family: str, tmp_path: Path) -> None:
    tiny_encoder(family).save_pretrained(tmp_path / family)  # BERT-like ones without a pooler
    _check(tmp_path / family)


@pytest.mark.parametrize(
    ("model_class", "config"),
    [
        ("BertForMaskedLM", transformers.BertConfig(**SMALL)),  # `bert.` prefix, no pooler
        ("RobertaForSequenceClassification", transformers.RobertaConfig(**SMALL)),
        ("LlamaForCausalLM", transformers.LlamaConfig(**SMALL, tie_word_embeddings=True)),
        ("GPT2LMHeadModel", transformers.GPT2Config(n_embd=32, n_layer=2, n_head=4)),
    ],
)
def test_a_task_models_checkpoint_passes(model_class: str, config, tmp_path: Path) -> None:
    getattr(transformers, model_class)(config).save_pretrained(tmp_path / "m")
    _check(tmp_path / "m")


def test_shards_and_the_packaged_minilm_pass(bert: Path, tmp_path: Path) -> None:
    tiny_encoder("llama").save_pretrained(tmp_path / "shards", max_shard_size="20KB")
    assert len(list((tmp_path / "shards").glob("model-*.safetensors"))) > 1
    _check(tmp_path / "shards")
    _check(packaged_minilm_path())


def test_a_config_that_does_not_match_the_weights_is_refused(bert: Path, capfd) -> None:
    """transformers built the third layer from random values and trained on, with a LOAD REPORT
    table on stderr."""
    config = json.loads((bert / "config.json").read_text())
    (bert / "config.json").write_text(json.dumps({**config, "num_hidden_layers": 3}))
    assert _refused(bert, capfd) == (
        f"base_model: {bert}: 16 weights of the model its config.json describes are not in its "
        "checkpoint (encoder.layer.2.attention.output.LayerNorm.bias, "
        "encoder.layer.2.attention.output.LayerNorm.weight, "
        "encoder.layer.2.attention.output.dense.bias and 13 more), and would stay random in the "
        "frozen base; give it the config.json that matches its weights (the one they were saved "
        "with)"
    )


class _Touch:
    """Unpickled with its code, it would make the file `marker`."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (pathlib.Path.touch, (self.marker,))


def test_a_pickle_holding_more_than_tensors_is_never_unpickled(bert: Path, capfd) -> None:
    """It was torch's 69-line UnpicklingError, which suggests weights_only=False."""
    tensors = load_file(bert / "model.safetensors")
    (bert / "model.safetensors").unlink()
    marker = bert.parent / "ran"
    torch.save({**tensors, "extra": _Touch(marker)}, bert / "pytorch_model.bin")
    message = _refused(bert, capfd)
    assert message.startswith(f"base_model: {bert / 'pytorch_model.bin'} holds more than tensors")
    assert message.endswith(
        "so it is not loaded (never load it with weights_only=False: that runs the code the "
        "pickle names); save the model as safetensors (save_pretrained) from a source you trust"
    )
    assert not marker.exists()


def test_a_pickle_of_tensors_passes(bert: Path) -> None:
    tensors = load_file(bert / "model.safetensors")
    (bert / "model.safetensors").unlink()
    torch.save(tensors, bert / "pytorch_model.bin")
    assert checkpoint_names(bert) == set(tensors)
    _check(bert)


def test_a_safetensors_file_cut_short_is_refused_naming_it(bert: Path, tmp_path, capfd) -> None:
    """It was a SafetensorError traceback; a shard of a sharded checkpoint is named too."""
    weights = bert / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:20000])
    assert _refused(bert, capfd) == (
        f"base_model: {weights} is incomplete or corrupt (Error while deserializing header: "
        "incomplete metadata, file not fully covered); save the model again (save_pretrained) "
        "or download it again"
    )
    tiny_encoder("bert").save_pretrained(tmp_path / "shards", max_shard_size="20KB")
    shard = sorted((tmp_path / "shards").glob("model-*.safetensors"))[-1]
    shard.write_bytes(shard.read_bytes()[:-10])
    assert _refused(tmp_path / "shards", capfd).startswith(f"base_model: {shard} is incomplete")


def test_an_encoder_decoder_model_is_refused(tmp_path: Path) -> None:
    """With a declared layout it passed validation and failed in the first step."""
    config = transformers.T5Config(d_model=32, d_ff=64, num_layers=2, num_heads=2, d_kv=16,
                                   vocab_size=100)  # fmt: skip
    transformers.T5Model(config).save_pretrained(tmp_path / "t5")
    with pytest.raises(BaseModelError) as caught:
        load_encoder(str(tmp_path / "t5"))
    assert str(caught.value) == (
        f"base_model: {tmp_path / 't5'} is an encoder-decoder model (t5), and adapterfleet "
        "trains on encoder-only or decoder-only bases; give one of those (the README's model "
        "families)"
    )
