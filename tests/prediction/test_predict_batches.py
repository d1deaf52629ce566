"""The torch-only batch loop: length-grouped batches, probabilities back in input order."""

from __future__ import annotations

import pytest
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
from adapterfleet.training.runtime import logits_of


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


def _rows(count: int, low: int, high: int, seed: int = 0) -> Rows:
    generator = torch.Generator().manual_seed(seed)
    lengths = torch.randint(low, high, (count,), generator=generator).tolist()
    return Rows([torch.randint(5, 90, (n,), generator=generator).tolist() for n in lengths])


def test_cuda_graphs_on_a_cpu_is_the_plain_forward():
    """`predict` passes `cuda_graphs` from the trained config (auto by default): on a CPU it
    changes nothing, no warning, the same numbers."""
    import warnings

    from adapterfleet.training.predict import forward_of

    model, rows = _model(), _rows(20, 2, 30)
    eager = predict_probabilities(model, rows, 4, pad_token_id=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        graphed = predict_probabilities(model, rows, 4, pad_token_id=0, cuda_graphs=True)
    torch.testing.assert_close(graphed, eager, atol=0, rtol=0)
    assert not hasattr(forward_of(model, torch.device("cpu"), True), "replays")


def test_a_forward_kept_across_calls_serves_every_batch_of_each():
    """`predict --ray` calls a worker once per block of rows: it passes one `forward_of`, so a
    GPU's graphs are captured once per width for the worker, not again for every block."""
    from adapterfleet.training.predict import forward_of

    model, rows = _model(), _rows(20, 2, 30)
    plain, widths = forward_of(model, torch.device("cpu"), False), []

    def kept(batch: dict) -> torch.Tensor:
        widths.append(batch["input_ids"].shape[1])
        return plain(batch)

    for _ in range(2):
        got = predict_probabilities(model, rows, 4, pad_token_id=0, forward=kept)
    assert len(widths) == 2 * 5  # 20 rows in batches of 4, twice
    torch.testing.assert_close(got, predict_probabilities(model, rows, 4, pad_token_id=0))


def test_predict_computes_in_the_precision_the_model_was_evaluated_in():
    """`predict` autocasts as the dev evaluation did (`training.precision`): bf16 probabilities
    are the model's bf16-autocast forward, near the float32 ones and not them; auto is float32 on
    a CPU, and fp16 (a GPU's precision) predicts in float32 there."""
    from adapterfleet.training.predict import prediction_dtype

    cpu = torch.device("cpu")
    assert prediction_dtype("auto", cpu) is None and prediction_dtype("fp16", cpu) is None
    assert prediction_dtype("bf16", cpu) is torch.bfloat16
    model, rows = _model(), _rows(12, 2, 30)
    fp32 = predict_probabilities(model, rows, 4, pad_token_id=0)
    bf16 = predict_probabilities(model, rows, 12, pad_token_id=0, dtype=torch.bfloat16)
    batch = {"input_ids": torch.zeros(12, max(rows.lengths), dtype=torch.long)}
    batch["attention_mask"] = torch.zeros_like(batch["input_ids"])
    for index, sequence in enumerate(rows.sequences):
        batch["input_ids"][index, : len(sequence)] = torch.tensor(sequence)
        batch["attention_mask"][index, : len(sequence)] = 1
    model.eval()
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        want = torch.softmax(logits_of(model(batch)).float(), dim=-1)
    torch.testing.assert_close(bf16, want, atol=0, rtol=0)
    assert 0 < (bf16 - fp32).abs().max() < 0.05


def _fusion_model() -> AdapterModel:
    from adapterfleet.fusion import FusionConfig, add_fusion, set_active_fusion

    model = AdapterModel(tiny_encoder())
    names = ["a", "b", "c"]
    for index, name in enumerate(names):  # widths 4, 4, 8: the stacked form's general case
        add_adapter(model, name, AdapterConfig("pfeiffer", 8 if index == 2 else 4))
    add_fusion(model, "f", names, FusionConfig())
    set_active_fusion(model, "f")
    model.add_head("f", HeadConfig(num_labels=3))
    with torch.no_grad():  # Q, K, V and the head away from their start: a fusion with a choice
        for name, param in model.named_parameters():
            if "fusion" in name or "heads" in name:
                param.add_(0.2 * torch.randn_like(param))
    return model


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("family", ["bert-fusion", "llama"])
def test_replayed_prediction_gives_the_eager_probabilities(family):
    """On a GPU `predict` replays each batch shape's forward: the eager forward's probabilities
    (a fusion's folded eval form and a decoder's last-token head), each width captured once."""
    import warnings

    from helpers import DECODERS

    from adapterfleet.training.predict import forward_of

    if family == "bert-fusion":
        model = _fusion_model()
    else:
        assert family in DECODERS
        model = AdapterModel(tiny_encoder(family))
        add_adapter(model, "t", AdapterConfig("pfeiffer", reduction_factor=4))
        set_active_adapter(model, "t")
        model.add_head("t", HeadConfig(num_labels=3, pooling="last"))
    # the attention from_pretrained picks (transformers 5.17's eager mask copies from the host)
    model.encoder_model.set_attn_implementation("sdpa")
    cuda = torch.device("cuda")
    model.to(cuda).train()
    rows = _rows(70, 3, 40, seed=1)  # batches of 8 in 5 padded widths, most of them repeated
    eager = predict_probabilities(model, rows, 8, pad_token_id=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # every width captured
        graphed = predict_probabilities(model, rows, 8, pad_token_id=0, cuda_graphs=True)
    torch.testing.assert_close(graphed, eager, atol=1e-5, rtol=1e-5)
    assert model.training  # the mode restored
    kept = forward_of(model, cuda, True)  # as a `predict` worker keeps it across calls
    for _ in range(2):
        again = predict_probabilities(model, rows, 8, pad_token_id=0, forward=kept)
    torch.testing.assert_close(again, eager, atol=1e-5, rtol=1e-5)
    assert kept.replays == 2 * 9 - len(kept.graphs)  # the second call replays every batch
    # in bf16, as a model trained under precision auto is evaluated on this GPU
    bf16 = predict_probabilities(model, rows, 8, pad_token_id=0, dtype=torch.bfloat16)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        graphed = predict_probabilities(
            model, rows, 8, pad_token_id=0, cuda_graphs=True, dtype=torch.bfloat16
        )
    torch.testing.assert_close(graphed, bf16, atol=1e-3, rtol=0)
    assert 0 < (bf16 - eager).abs().max() < 0.05

    forward = forward_of(model.eval(), cuda, True)
    batches = [
        {
            "input_ids": torch.randint(5, 90, (4, width), device=cuda),
            "attention_mask": torch.ones(4, width, dtype=torch.long, device=cuda),
        }
        for width in (8, 16, 8, 8)
    ]
    with torch.no_grad():
        outs = [forward(batch) for batch in batches]
        alone = [logits_of(model(batch)).float() for batch in batches]
    assert (len(forward.graphs), forward.replays) == (2, 2)
    for out, want in zip(outs, alone, strict=True):  # each replay's output its own tensor
        torch.testing.assert_close(out, want, atol=1e-5, rtol=1e-5)
