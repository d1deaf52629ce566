"""The torch-only batch loop: length-grouped batches, probabilities back in input order."""

from __future__ import annotations

import torch
from helpers import tiny_encoder

from adapterfleet.adapters import (
    AdapterConfig,
    AdapterModel,
    HeadConfig,
    add_adapter,
    set_active_adapter,
)
from adapterfleet.training import predict_batches, predict_probabilities


class Rows:
    def __init__(self, sequences: list[list[int]]) -> None:
        self.sequences = sequences
        self.lengths = [len(s) for s in sequences]

    def __len__(self) -> int:
        return len(self.sequences)

    def __getitem__(self, index: int) -> dict:
        return {"input_ids": self.sequences[index], "label": 0}


def _model() -> AdapterModel:
    model = AdapterModel(tiny_encoder())
    add_adapter(model, "t", AdapterConfig("pfeiffer", reduction_factor=4))
    set_active_adapter(model, "t")
    model.add_head("t", HeadConfig(num_labels=3))
    return model.train()  # predict must switch dropout off and restore the mode


def test_probabilities_are_in_input_order_whatever_the_batch_size():
    generator = torch.Generator().manual_seed(0)
    lengths = torch.randint(2, 30, (23,), generator=generator).tolist()
    rows = Rows([torch.randint(5, 100, (n,), generator=generator).tolist() for n in lengths])
    model = _model()
    with torch.no_grad():
        model.eval()
        alone = torch.stack(
            [torch.softmax(model(torch.tensor([s]))[0], -1) for s in rows.sequences]
        )
        model.train()
    for batch_size in (1, 4, 23, 64):
        got = predict_probabilities(model, rows, batch_size, pad_token_id=0)
        torch.testing.assert_close(got, alone, atol=1e-5, rtol=1e-5)
        assert model.training
    seen = [i for indices, probs in predict_batches(model, rows, 4, 0) for i in indices]
    assert sorted(seen) == list(range(23))
    first = next(iter(predict_batches(model, rows, 4, 0)))[0]
    assert [lengths[i] for i in first] == sorted(lengths, reverse=True)[:4]  # longest first
