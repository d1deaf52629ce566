"""Batch prediction: class probabilities (or a regression head's numbers) of a loaded model over a
tokenised input.

The model is an `AdapterModel` with its adapter or fusion active and its head selected; the input
is any indexable of tokenised rows with `lengths` (a `TokenizedSplit`). Batches are length-grouped
(longest first) to keep padding small; each batch comes back with the row indices it holds, and
`predict_probabilities` puts the rows back in input order. On a CUDA device with `cuda_graphs`
each batch shape's forward is captured once as a CUDA graph and replayed for the later batches
of that shape (`forward_of`; the model's weights must not change while it predicts). The forward
autocasts to `dtype` where one is given: `prediction_dtype` of the precision the model was trained
and evaluated in, so `predict` scores as the dev evaluation did.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Protocol

import torch

from adapterfleet.data.batching import LengthGroupedBatchSampler, PadCollator
from adapterfleet.training.graphs import StepGraphs
from adapterfleet.training.runtime import (
    Batch,
    autocast,
    autocast_dtype,
    logits_of,
    pad_multiple,
    progress,
    to_device,
)

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
    dtype: torch.dtype | None = None,
    forward: Forward | None = None,
) -> Iterator[tuple[list[int], torch.Tensor]]:
    """(row indices, probabilities (batch, classes) on the CPU) per length-grouped batch; with
    `regression`, the head's numbers (batch, 1) as they come, in the labels' units.

    The model is in eval mode while the batches are produced and back in its former mode after;
    `cuda_graphs` replays each batch shape's forward on a CUDA device and `dtype` autocasts it
    (`forward_of`). A caller that predicts again and again with unchanged weights passes one
    `forward_of(model, ...)` as `forward`, so its graphs are captured once, not per call.
    """
    device = device or _model_device(model)
    sampler = LengthGroupedBatchSampler(rows.lengths, batch_size, shuffle=False)
    collate = PadCollator(pad_token_id, pad_multiple(device), max(rows.lengths, default=None))
    was_training = model.training
    model.eval()
    forward = forward or forward_of(model, device, cuda_graphs, dtype)
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
    counted: Callable[[int], None] | None = None,
    regression: bool = False,
    cuda_graphs: bool = False,
    dtype: torch.dtype | None = None,
    forward: Forward | None = None,
) -> torch.Tensor:
    """Probabilities (rows, classes) in the order of `rows`; numbers (rows, 1) for `regression`.
    `counted` is called with the number of rows done after each batch."""
    out: torch.Tensor | None = None
    done = 0
    for indices, probabilities in predict_batches(
        model,
        rows,
        batch_size,
        pad_token_id,
        device=device,
        show_progress=show_progress,
        regression=regression,
        cuda_graphs=cuda_graphs,
        dtype=dtype,
        forward=forward,
    ):
        if out is None:
            out = torch.empty(len(rows), probabilities.shape[-1])
        out[indices] = probabilities
        done += len(indices)
        if counted is not None:
            counted(done)
    if out is None:
        raise ValueError("rows is empty: nothing to predict")
    return out


def forward_of(
    model: torch.nn.Module,
    device: torch.device,
    cuda_graphs: bool,
    dtype: torch.dtype | None = None,
) -> Forward:
    """The model's float32 logits of a batch, computed under autocast to `dtype` where one is
    given. With `cuda_graphs` on a CUDA device, through one CUDA graph per batch shape: the first
    batch of a shape runs eagerly, later ones replay (a fusion's folded weights, cached in eval
    mode, are fixed into the graph); a forward no graph can hold goes on eagerly with a warning.
    Call it without gradients, in eval mode."""
    graphed = cuda_graphs and device.type == "cuda"

    def forward(batch: Batch) -> torch.Tensor:
        with autocast(device, dtype, cache=not graphed):  # a capture cannot keep the cast cache
            return logits_of(model(batch)).float()

    return StepGraphs(forward, (), purpose="prediction") if graphed else forward


def prediction_dtype(precision: str, device: torch.device) -> torch.dtype | None:
    """The autocast dtype `predict` computes in on `device` for a model trained with
    `training.precision`: the one its dev evaluation used (`autocast_dtype`: float32 on a CPU
    under auto, bf16 on a GPU that has it); float32 for fp16 off a GPU."""
    if precision == "fp16" and device.type != "cuda":
        return None
    return autocast_dtype(precision, device)


def _model_device(model: torch.nn.Module) -> torch.device:
    first = next(model.parameters(), None)
    return first.device if first is not None else torch.device("cpu")
