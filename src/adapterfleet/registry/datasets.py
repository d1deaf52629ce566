"""The data a run trained and was scored on, as MLflow's dataset inputs: the runs table's
`Dataset` column and the run page's "Datasets used" (they showed "-"), with how many rows each
split had after slicing, so every number a run logged says what it was made on."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from adapterfleet.console import Say
from adapterfleet.registry.errors import call_with_retry
from adapterfleet.registry.store import get_client

if TYPE_CHECKING:
    from adapterfleet.registry.runs import MlflowRunLogger

CONTEXT_TAG = "mlflow.data.context"  # MLflow's own: "train", "eval" beside the dataset
TRAIN, EVAL = "train", "eval"


@dataclass(frozen=True)
class DatasetRecord:
    """One split as MLflow records a dataset. `digest` (MLflow keeps at most 36 characters, and
    one dataset per name and digest in an experiment, with the profile it was first logged
    with) must change with the rows used, not only with the file; `source` is MLflow's JSON of
    a local file (`{"uri": ...}`, type `local`) or a hub split (type `hugging_face`)."""

    name: str
    digest: str
    source_type: str
    source: str
    context: str  # TRAIN or EVAL
    profile: Mapping[str, Any] = field(default_factory=dict)


def log_dataset_inputs(
    logger: MlflowRunLogger, records: Sequence[DatasetRecord], say: Say = print
) -> None:
    """Log `records` as the run's dataset inputs, those it does not hold yet (a reopened run
    logs nothing twice). A courtesy: a store that refuses them is said in one line, and the
    run goes on."""
    from mlflow.entities import Dataset, DatasetInput, InputTag

    client = get_client(logger.uri)
    run_id = logger.run_id
    try:
        run = call_with_retry(
            lambda: client.get_run(run_id), what=f"read run {run_id}", timeout_s=30
        )
        held = {(i.dataset.name, i.dataset.digest) for i in run.inputs.dataset_inputs}
        inputs = [
            DatasetInput(
                Dataset(r.name, r.digest, r.source_type, r.source, None, json.dumps(r.profile)),
                [InputTag(CONTEXT_TAG, r.context)],
            )
            for r in records
            if (r.name, r.digest) not in held
        ]
        if inputs:
            call_with_retry(
                lambda: client.log_inputs(run_id, datasets=inputs),
                what=f"log the datasets of run {run_id}",
                timeout_s=30,
            )
    except Exception as error:  # noqa: BLE001 - the run's own metrics matter more
        first = str(error).splitlines()[0] if str(error) else type(error).__name__
        say(f"could not log the datasets of MLflow run {run_id} (it goes on without): {first}")
