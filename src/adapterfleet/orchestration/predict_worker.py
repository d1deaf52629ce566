"""The model `predict` scores rows with: pulled into a temporary folder, loaded once with its
tokenizer (once per `--ray` actor), and every row's probabilities, here or on Ray Data."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from adapterfleet.adapters.files import OtherBaseError
from adapterfleet.console import Say
from adapterfleet.data.prediction_input import PredictionInput, encode_input
from adapterfleet.orchestration.limits import version_on_other_base
from adapterfleet.orchestration.predict import (
    PredictSetup,
    check_head,
    load_model,
    pull_version,
    rows_text,
)
from adapterfleet.tuning.trained_settings import cut_note

if TYPE_CHECKING:
    import torch


def scored(
    setup: PredictSetup,
    data: PredictionInput,
    use_ray: bool,
    workers: int | None,
    progress: tuple[bool, Callable[[int], None] | None],
    say: Say,
    trained: dict[str, Any],
) -> torch.Tensor:
    """Every row's probabilities (here, or on Ray Data), and a line of the rows cut at
    max_length; `progress`: whether a bar shows them, else `counted(rows done)`."""
    title = f"predict {setup.target}"
    show_progress, counted = progress
    if use_ray:
        from adapterfleet.orchestration.predict_ray import ray_probabilities

        probabilities, cut = ray_probabilities(setup, data, workers, counted)
    else:
        worker = PredictWorker(setup)
        probabilities = worker.probabilities(data, show_progress, counted)
        cut = sum(worker.cut_rows)
    if cut:
        note = cut_note(setup.config.max_length, trained.get("max_length"))
        say(f"{title}: {cut:,} of {rows_text(len(data))} {note}")
    return probabilities


class PredictWorker:
    """A pulled and loaded model with its tokenizer; `probabilities` of text rows, and after
    each call `cut_rows`: whether each row reached max_length (and was cut there)."""

    def __init__(self, setup: PredictSetup) -> None:
        from adapterfleet.adapters import load_tokenizer
        from adapterfleet.training.predict import forward_of, prediction_dtype
        from adapterfleet.training.runtime import resolve_device

        self.setup = setup
        config = setup.config
        with tempfile.TemporaryDirectory(prefix="adapterfleet-predict-") as folder:
            pulled = pull_version(config, setup.uri, setup.info, Path(folder))
            try:
                self.model = load_model(config.base, setup.target, pulled)
            except OtherBaseError as error:  # not a temporary folder's name: the version's
                raise version_on_other_base(setup.info, error, config.base_model) from None
        self.device = resolve_device(setup.device)
        self.model.to(self.device)
        # one forward for all calls: a GPU's graphs captured once per width, not per Ray block
        dtype = prediction_dtype(setup.precision, self.device)
        self.forward = forward_of(self.model, self.device, setup.cuda_graphs, dtype)
        self.tokenizer = load_tokenizer(config.base_model)
        self.spec = config.tasks[setup.target]
        self.cut_rows: list[bool] = []
        check_head(self.model, setup.target, self.spec)

    def probabilities(
        self,
        data: PredictionInput,
        show_progress: bool = False,
        counted: Callable[[int], None] | None = None,
    ) -> torch.Tensor:
        """(rows, classes); a bar on a terminal, or `counted(rows done)` after each batch."""
        from adapterfleet.training.predict import predict_probabilities

        max_length = self.setup.config.max_length
        rows = encode_input(data, self.spec, self.tokenizer, max_length)
        self.cut_rows = [n >= max_length for n in rows.lengths]
        pad = self.tokenizer.pad_token_id or 0
        return predict_probabilities(
            self.model,
            rows,
            self.setup.batch_size,
            int(pad),
            device=self.device,
            show_progress=show_progress,
            counted=counted,
            regression=self.spec.is_regression,
            forward=self.forward,
        )
