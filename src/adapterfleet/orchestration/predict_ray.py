"""`adapterfleet predict --ray`: the rows through Ray Data, `map_batches` with `_RayPredictor`,
an actor that pulls and loads the model once (`PredictWorker`) and predicts blocks of rows;
the result is put back in input order here and written as a local run's is."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from adapterfleet.console import Level
from adapterfleet.data.prediction_input import PredictionInput
from adapterfleet.orchestration.relay import library_output, ray_log_level
from adapterfleet.orchestration.sweep import ensure_ray

if TYPE_CHECKING:
    import numpy as np
    import torch

    from adapterfleet.orchestration.predict import PredictSetup

RAY_BATCH_ROWS = 256  # rows per map_batches call; each is cut into length-grouped batches


class _RayPredictor:
    """The `map_batches` callable: loads the model once per actor, then predicts row batches."""

    def __init__(self, setup: PredictSetup, fields: tuple[str, ...]) -> None:
        import torch

        from adapterfleet.orchestration.predict_worker import PredictWorker

        torch.set_num_threads(max(1, int(setup.config.resources.cpu)))
        self.worker = PredictWorker(setup)
        self.fields = fields

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        import numpy as np

        columns = [batch[f"text_{i}"].tolist() for i in range(len(self.fields))]
        texts = [tuple(str(v) for v in values) for values in zip(*columns, strict=True)]
        data = PredictionInput("ray batch", self.fields, texts)
        probabilities = self.worker.probabilities(data)
        cut = np.array(self.worker.cut_rows, dtype=bool)
        return {"row": batch["row"], "probabilities": probabilities.numpy(), "cut": cut}


def ray_probabilities(
    setup: PredictSetup,
    data: PredictionInput,
    workers: int | None,
    counted: Callable[[int], None] | None = None,
) -> tuple[torch.Tensor, int]:
    """The probabilities of every row through Ray Data and the number of rows cut at
    max_length; `counted(rows done)` as they come back. What Ray and Ray Data say below a
    warning (their INFO lines, a log-based progress report every ten seconds) stays in Ray's
    log files, as in `run`."""
    with library_output(Level.DEFAULT), _quiet("ray.data"):
        ensure_ray(None, None, ray_log_level(Level.DEFAULT))
        return _ray_probabilities(setup, data, workers, counted)


@contextmanager
def _quiet(name: str) -> Iterator[None]:
    """Logger `name` (which Ray Data sets to INFO when imported) at WARNING for the block."""
    logger = logging.getLogger(name)
    import ray.data  # noqa: F401 - configures its logger first

    before = logger.level
    logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        logger.setLevel(before)


def _ray_probabilities(
    setup: PredictSetup,
    data: PredictionInput,
    workers: int | None,
    counted: Callable[[int], None] | None,
) -> tuple[torch.Tensor, int]:
    import numpy as np
    import ray
    import torch

    resources = setup.config.resources
    if workers is None:
        cpus = float(ray.cluster_resources().get("CPU", 1.0))
        pool = ray.data.ActorPoolStrategy(min_size=1, max_size=max(1, int(cpus // resources.cpu)))
    else:
        pool = ray.data.ActorPoolStrategy(size=workers)
    items = [
        {"row": index, **{f"text_{i}": text for i, text in enumerate(texts)}}
        for index, texts in enumerate(data.texts)
    ]
    predicted = ray.data.from_items(items).map_batches(
        _RayPredictor,
        fn_constructor_args=(setup, data.fields),
        batch_size=RAY_BATCH_ROWS,
        compute=pool,
        num_cpus=resources.cpu,
        num_gpus=resources.gpu or None,
        udf_modifying_row_count=False,
    )
    rows, probabilities, cut = [], [], 0
    # put in order here: a Ray Data sort samples its blocks in workers of its own (one aborted);
    # batches of RAY_BATCH_ROWS whatever blocks Ray Data made (one of all rows: no progress line)
    for batch in predicted.iter_batches(batch_size=RAY_BATCH_ROWS, batch_format="numpy"):
        rows.append(batch["row"])
        probabilities.append(batch["probabilities"])
        cut += int(batch["cut"].sum())
        if counted is not None:
            counted(sum(len(r) for r in rows))
    order = np.concatenate(rows)
    if not np.array_equal(np.sort(order), np.arange(len(data))):
        raise RuntimeError(f"Ray Data returned rows {order[:10]}...; expected 0..{len(data) - 1}")
    return torch.from_numpy(np.concatenate(probabilities)[np.argsort(order)]), cut
