"""Batch prediction: class probabilities (or a regression head's numbers) of a loaded model over a
tokenised input.

The model is an `AdapterModel` with its adapter or fusion active and its head selected; the input
is any indexable of tokenised rows with `lengths` (a `TokenizedSplit`). Batches are length-grouped
(longest first) to keep padding small; each batch comes back with the row indices it holds, and
`predict_probabilities` puts the rows back in input order. On a CUDA device with `cuda_graphs`
each batch shape's forward is captured once as a CUDA graph and replayed for the later batches
of that shape (`forward_of`; the model's weights must not change while it predicts).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Protocol

import torch

from adapterfleet.data.batching import LengthGroupedBatchSampler, PadCollator
from adapterfleet.training.graphs import StepGraphs
from adapterfleet.training.runtime import Batch, logits_of, pad_multiple, progress, to_device

Forward = Callable[[Batch], torch.Tensor]  # a batch on the model's device -> float32 logits


class TokenizedRows(Protocol):
    """What prediction reads: rows with `input_ids` (and `token_type_ids`), and their lengths."""

    lengths: Sequence[int]

    def __len__(self) -> int: ...

    def __getitem__(self, index: int) -> Mapping[str, Any]: ...


@torch.no_grad()
def predict_batches(
    model: torch.nn.Module,
    rows: TokenizedRows,
    batch_size: int,
    pad_token_id: int,
    *,
    device: torch.device | None = None,
    show_progress: bool = False,
    regression: bool = False,
    cuda_graphs: bool = False,
    forward: Forward | None = None,
) -> Iterator[tuple[list[int], torch.Tensor]]:
    """(row indices, probabilities (batch, classes) on the CPU) per length-grouped batch; with
    `regression`, the head's numbers (batch, 1) as they come, in the labels' units.

    The model is in eval mode while the batches are produced and back in its former mode after;
    `cuda_graphs` replays each batch shape's forward on a CUDA device (`forward_of`). A caller
    that predicts again and again with unchanged weights passes one `forward_of(model, ...)` as
    `forward`, so its graphs are captured once, not per call.
    """
    device = device or _model_device(model)
    sampler = LengthGroupedBatchSampler(rows.lengths, batch_size, shuffle=False)
    collate = PadCollator(pad_token_id, pad_multiple(device), max(rows.lengths, default=None))
    was_training = model.training
    model.eval()
    forward = forward or forward_of(model, device, cuda_graphs)
    try:
        for indices in progress(sampler.batches(), "predict", show_progress):
            logits = forward(to_device(collate([rows[i] for i in indices]), device))
            yield indices, (logits if regression else torch.softmax(logits, dim=-1)).cpu()
    finally:
        model.train(was_training)


def predict_probabilities(
    model: torch.nn.Module,
    rows: TokenizedRows,
    batch_size: int,
    pad_token_id: int,
    *,
    device: torch.device | None = None,
    show_progress: bool = False,
    regression: bool = False,
    cuda_graphs: bool = False,
    forward: Forward | None = None,
) -> torch.Tensor:
    """Probabilities (rows, classes) in the order of `rows`; numbers (rows, 1) for `regression`."""
    out: torch.Tensor | None = None
    for indices, probabilities in predict_batches(
        model,
        rows,
        batch_size,
        pad_token_id,
        device=device,
        show_progress=show_progress,
        regression=regression,
        cuda_graphs=cuda_graphs,
        forward=forward,
    ):
        if out is None:
            out = torch.empty(len(rows), probabilities.shape[-1])
        out[indices] = probabilities
    if out is None:
        raise ValueError("rows is empty: nothing to predict")
    return out


def forward_of(model: torch.nn.Module, device: torch.device, cuda_graphs: bool) -> Forward:
    """The model's float32 logits of a batch. With `cuda_graphs` on a CUDA device, through one
    CUDA graph per batch shape: the first batch of a shape runs eagerly, later ones replay (a
    fusion's folded weights, cached in eval mode, are fixed into the graph); a forward no graph
    can hold goes on eagerly with a warning. Call it without gradients, in eval mode."""

    def forward(batch: Batch) -> torch.Tensor:
        return logits_of(model(batch)).float()

    if cuda_graphs and device.type == "cuda":
        return StepGraphs(forward, (), purpose="prediction")
    return forward


def _model_device(model: torch.nn.Module) -> torch.device:
    first = next(model.parameters(), None)
    return first.device if first is not None else torch.device("cpu")
