"""What `AdapterModel.forward` takes: the four inputs as keywords or one mapping, nothing else;
position ids reach the base, and a GPT-2 reads a row the same padded left or right."""

import pytest
import torch
from helpers import tiny_encoder

from adapterfleet.adapters import AdapterConfig, AdapterModel, HeadConfig, add_adapter
from adapterfleet.adapters.heads import pool


def _model(family: str = "bert") -> AdapterModel:
    model = AdapterModel(tiny_encoder(family))
    model.add_head("t", HeadConfig(num_labels=3))
    return model.eval()


def _inputs() -> dict[str, torch.Tensor]:
    ids = torch.randint(5, 100, (2, 6), generator=torch.Generator().manual_seed(0))
    mask = torch.ones_like(ids)
    mask[0, -2:] = 0
    return {"input_ids": ids, "attention_mask": mask}


def test_a_misspelt_keyword_is_refused_with_what_the_forward_takes():
    inputs = _inputs()
    with pytest.raises(TypeError) as error:
        _model()(inputs["input_ids"], attention_masks=inputs["attention_mask"])
    message = str(error.value)
    assert "'attention_masks'" in message and "did you mean 'attention_mask'?" in message
    assert "input_ids, attention_mask, token_type_ids, position_ids" in message


def test_labels_are_refused_the_loss_being_the_callers():
    with pytest.raises(TypeError, match="'labels'.*returns logits and the loss is the caller's"):
        _model()(**_inputs(), labels=torch.tensor([0, 1]))


def test_a_batch_dict_may_carry_labels_and_other_keys():
    model = _model()
    inputs = _inputs()
    with torch.no_grad():
        assert torch.equal(model({**inputs, "labels": torch.tensor([0, 1])}), model(**inputs))


@pytest.mark.parametrize("family", ["bert", "llama"])
def test_position_ids_reach_the_base(family):
    model = _model(family)
    inputs = {**_inputs(), "position_ids": torch.arange(6).repeat(2, 1) * 2}
    with torch.no_grad():
        hidden = model.encoder_model(**inputs).last_hidden_state
        expected = model.heads["t"](
            pool(hidden, inputs["attention_mask"], "cls" if family == "bert" else "last")
        )
        assert torch.allclose(model(**inputs), expected, atol=1e-6)
        assert not torch.allclose(model(**inputs), model(**_inputs()), atol=1e-4)


def _padded(side: str) -> dict[str, torch.Tensor]:
    """Rows of 3, 6 and 4 tokens, padded to 6 on `side` with the pad id 0."""
    rows = [[11, 12, 13], [21, 22, 23, 24, 25, 26], [31, 32, 33, 34]]
    ids = torch.zeros(3, 6, dtype=torch.long)
    mask = torch.zeros(3, 6, dtype=torch.long)
    for i, row in enumerate(rows):
        where = slice(0, len(row)) if side == "right" else slice(6 - len(row), 6)
        ids[i, where] = torch.tensor(row)
        mask[i, where] = 1
    return {"input_ids": ids, "attention_mask": mask}


def test_gpt2_gives_the_same_logits_padded_left_or_right():
    model = AdapterModel(tiny_encoder("gpt2"))
    add_adapter(model, "a", AdapterConfig(reduction_factor=4))
    model.add_head("t", HeadConfig(num_labels=3))
    model.eval()
    right, left = _padded("right"), _padded("left")
    with torch.no_grad():
        logits = model(**right)
        assert (logits - model(**left)).abs().max() <= 1e-5
        hidden = model.encoder_model(**right).last_hidden_state  # HF's own positions: 0, 1, ...
        assert torch.allclose(
            logits, model.heads["t"](pool(hidden, right["attention_mask"], "last")), atol=1e-6
        )


def test_a_tokenizers_batch_encoding_is_taken_as_one_mapping():
    from transformers import BatchEncoding

    model = _model()
    inputs = _inputs()
    with torch.no_grad():
        assert torch.equal(model(BatchEncoding(inputs)), model(**inputs))


def test_a_classification_head_refuses_a_multiple_choice_batch():
    inputs = {k: v.unsqueeze(1).expand(-1, 4, -1) for k, v in _inputs().items()}
    with pytest.raises(
        ValueError, match=r"classification head: .* \(batch, tokens\), got \(2, 4, 6\)"
    ):
        _model()(inputs)


def test_a_multiple_choice_head_refuses_a_flat_batch():
    model = AdapterModel(tiny_encoder("bert"))
    model.add_head("mc", HeadConfig("multiple_choice", 4))
    with pytest.raises(
        ValueError,
        match=r"'mc' is a multiple_choice head: .* \(batch, choices, tokens\), got \(2, 6\)",
    ):
        model(_inputs())
    inputs = {k: v.unsqueeze(1).expand(-1, 4, -1) for k, v in _inputs().items()}
    assert model(inputs).shape == (2, 4)
