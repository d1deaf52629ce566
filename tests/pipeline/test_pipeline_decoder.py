"""`adapterfleet run` on a decoder: a tiny random Llama with a real byte-level BPE tokenizer that
has no pad token. Adapters sit pre-norm, heads pool the last real token, and the pipeline (sweep,
registry gate, fusion) works unchanged."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from tuning_support import config_document, make_tiny_decoder, run_pipeline_cli, write_config

from adapterfleet.adapters import load_tokenizer
from adapterfleet.config import load_config


@pytest.fixture(scope="module")
def decoder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_decoder(tmp_path_factory.mktemp("tiny-llama") / "model")


def test_the_decoder_tokenizer_pads_with_its_end_of_sequence_token(decoder):
    tokenizer = load_tokenizer(str(decoder))
    assert tokenizer.pad_token == tokenizer.eos_token == "<|endoftext|>"
    assert "token_type_ids" not in tokenizer("a red apple")


@pytest.mark.parametrize("command", [["tasks"], ["train", "--task", "fruit", "--out", "out"]])
def test_a_task_pooling_a_decoders_first_token_is_refused(tmp_path, decoder, command):
    """`pooling: cls` on a Llama trained a head that gave every input one prediction (its
    first token, a start token, sees no other token), at the majority class, without a word."""
    document = config_document(tmp_path, decoder, reduction_factors=[4])
    document["tasks"]["fruit"]["pooling"] = "cls"
    config = write_config(tmp_path, document)
    script = Path(sys.executable).with_name("adapterfleet")
    done = subprocess.run(
        [str(script), *command, "-c", str(config)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        "error: task 'fruit', pooling: cls pools the first token, which in a decoder (llama) "
        "sees no other token, so every input would get one prediction; use last (the "
        "decoder's default: leave pooling out) or mean"
    )
    assert not (tmp_path / "runs" / "mlflow.db").exists()


@pytest.mark.integration
def test_run_trains_registers_and_fuses_on_a_tiny_llama(tmp_path, decoder):
    document = config_document(tmp_path, decoder, reduction_factors=[4])
    document["fusion"] = {"targets": {"fruit": "all"}, "training": {"max_epochs": 2}}
    document["adapters"]["task_training"] = {"fruit": {"max_epochs": 4}}
    path = write_config(tmp_path, document)
    result = run_pipeline_cli(path, tmp_path)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-3000:]
    assert "registered tinysweep.fusion.fruit v1" in output
    from adapterfleet.results.status import pipeline_status

    config = load_config(path)
    status = pipeline_status(config, config.tracking_uri)
    best = {row.task: row.best for row in status.tasks}
    assert best["fruit"] is not None and best["fruit"] > 0.6  # balanced: chance is 0.5


def test_a_tokenizer_that_cannot_pad_is_refused_naming_the_fix(tmp_path):
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    from adapterfleet.adapters import BaseModelError

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.Whitespace()
    bpe.train_from_iterator(["a red apple and a blue boat"], trainers.BpeTrainer(vocab_size=60))
    PreTrainedTokenizerFast(tokenizer_object=bpe).save_pretrained(tmp_path / "no-pad")
    with pytest.raises(BaseModelError, match="no pad, end-of-sequence or unknown token.*pad_token"):
        load_tokenizer(str(tmp_path / "no-pad"))
