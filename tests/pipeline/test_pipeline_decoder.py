"""`adapterfleet run` on a decoder: a tiny random Llama with a real byte-level BPE tokenizer that
has no pad token. Adapters sit pre-norm, heads pool the last real token, and the pipeline (sweep,
registry gate, fusion) works unchanged."""

from __future__ import annotations

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
