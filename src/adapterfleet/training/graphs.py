"""Training steps as CUDA graphs (`TrainConfig.cuda_graphs`): each batch shape's forward and
backward is captured once and replayed for every later batch of that shape. Prediction's
forward replays the same way (`training.predict.forward_of`: a step with no parameters).

On a GPU a fusion step is thousands of small kernels, and the host's time to launch them, not
the GPU's work, sets the pace (`benchmarks/gpu_timeline.py`: on an H200, BERT-base, N=16,
32×128, 68.6 ms per eager step against 18.0 ms replayed). A replay is one launch.

How a step is captured (PyTorch's rules for whole-network capture):
- the first batch of a shape runs eagerly on a side stream (that is its real step, and the warm-up
  the capture needs), then the same step is captured into a graph, which runs nothing;
- gradients exist before the capture and stay put: the captured backward adds into them in
  place, so the loop zeroes them in place (`zero_grad(set_to_none=False)`) and gradient
  accumulation works as eagerly;
- tensors of the batch are copied into the graph's own input buffers before each replay; other
  values of the batch (and the model's Python-side choices, such as the fusion's folding by
  token count) are fixed at capture and are part of the shape's key;
- all graphs share one memory pool: a replay's outputs are read before the next replay;
- the autocast weight cache is off (a capture cannot keep it), the attention mask is always
  applied (transformers does not inspect a mask under capture), and dropout draws fresh numbers
  at every replay from the CUDA generator, which the graphs advance.

A capture that fails (an operation a graph cannot hold) leaves the gradients as the eager step
made them and switches the run to eager steps with a warning that names the reason.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

Step = Callable[[dict[str, Any]], torch.Tensor]  # forward, loss, backward; returns the loss


def shape_key(batch: dict[str, Any]) -> tuple:
    """What a captured step is fixed to: each tensor's shape and dtype, every other value."""
    return tuple(
        (name, (tuple(value.shape), value.dtype) if torch.is_tensor(value) else repr(value))
        for name, value in sorted(batch.items())
    )


@dataclass
class _Captured:
    graph: torch.cuda.CUDAGraph
    inputs: dict[str, Any]  # the batch as captured; its tensors are the graph's input buffers
    loss: torch.Tensor


@functools.cache
def warm_up_stream(device: int) -> torch.cuda.Stream:
    """The one side stream of every warm-up on `device`. PyTorch gives each stream a cuBLAS
    workspace that it keeps for the life of the process: a new stream per batch shape held
    ~65 MiB each on an H200, about 1 GiB after a run of 15 widths, until its stream pool of 32
    came round again (`benchmarks/gpu_fit.py`'s `gpu_allocated_before_mib`)."""
    return torch.cuda.Stream(device)


def _same(a: torch.Tensor | None, b: torch.Tensor | None) -> bool:
    return a is b or (a is not None and b is not None and a.data_ptr() == b.data_ptr())


class StepGraphs:
    """`step(batch)` on a CUDA device through one CUDA graph per batch shape: a training step
    (forward, loss, backward into `params`' gradients) or, with no `params`, a forward."""

    def __init__(
        self, step: Step, params: Sequence[torch.nn.Parameter], *, purpose: str = "training"
    ):
        self.step = step
        self.params = list(params)  # none for a forward without gradients
        self.purpose = purpose  # what the fallback warning says goes on eagerly
        self.graphs: dict[tuple, _Captured] = {}
        self.pool = torch.cuda.graph_pool_handle()
        self.disabled: str | None = None  # why the run went back to eager steps
        self.replays = 0

    def __call__(self, batch: dict[str, Any]) -> torch.Tensor:
        if self.disabled is not None:
            return self.step(batch)
        key = shape_key(batch)
        captured = self.graphs.get(key)
        if captured is None:
            loss = self._warm_up(batch)
            self._capture(key, batch)
            return loss
        for name, value in batch.items():
            if torch.is_tensor(value):
                captured.inputs[name].copy_(value, non_blocking=True)
        captured.graph.replay()
        self.replays += 1
        return captured.loss.clone()

    def _warm_up(self, batch: dict[str, Any]) -> torch.Tensor:
        """This batch's step, eagerly on a side stream (lazy initialisation stays out of the
        capture); afterwards every parameter that takes a gradient has one."""
        side = warm_up_stream(torch.cuda.current_device())
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            loss = self.step(batch)
        torch.cuda.current_stream().wait_stream(side)
        return loss

    def _capture(self, key: tuple, batch: dict[str, Any]) -> None:
        inputs = {k: v.clone() if torch.is_tensor(v) else v for k, v in batch.items()}
        grads = [p.grad for p in self.params]
        graph = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(graph, pool=self.pool):
                loss = self.step(inputs)
            pairs = zip(self.params, grads, strict=True)
            moved = [p for p, grad in pairs if not _same(p.grad, grad)]
            if moved:
                raise RuntimeError(
                    f"the captured backward replaced {len(moved)} gradient tensor(s) instead of "
                    "adding into them"
                )
        except Exception as error:  # noqa: BLE001 - any failed capture falls back to eager
            for param, grad in zip(self.params, grads, strict=True):
                param.grad = grad  # the capture ran no kernel: these hold the eager step's
            self.disabled = f"{type(error).__name__}: {str(error).splitlines()[0][:300]}"
            warnings.warn(
                f"training.cuda_graphs: the step for batch shape {dict(key)} could not be "
                f"captured ({self.disabled}); {self.purpose} goes on with eager steps",
                RuntimeWarning,
                stacklevel=3,
            )
            return
        self.graphs[key] = _Captured(graph, inputs, loss)
