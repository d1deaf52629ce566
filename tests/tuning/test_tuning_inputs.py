"""A job's train and dev data as its MLflow run's dataset inputs (`tuning/inputs.py`): what
each split is recorded as, and the logging against a real SQLite store. The runs of a real
sweep and a real fusion carry them too: tests/tuning/test_tuning_sweep.py,
tests/prediction/test_fusion_record.py."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

from tuning_support import write_tasks

from adapterfleet.data.tasks import TaskSpec
from adapterfleet.registry import default_tracking_uri, ensure_experiment, open_trial_run
from adapterfleet.registry.datasets import log_dataset_inputs
from adapterfleet.tuning.inputs import task_inputs
from adapterfleet.tuning.spec import spec_data_sha256


def _spec(folder: Path, **changes: object) -> TaskSpec:
    mapping = {**write_tasks(folder)["fruit"], **changes}
    return TaskSpec.from_mapping("fruit", mapping, folder)


def test_each_split_is_a_dataset_of_the_task_with_the_rows_it_used(tmp_path: Path) -> None:
    """The runs' Dataset column showed "-", and nothing said on how many rows a number was
    made (after `max_train_examples` and `rows:`)."""
    from adapterfleet.registry import sha256_file

    spec = _spec(tmp_path / "data")
    train, dev = task_inputs(spec, 80, 40)
    assert (train.name, train.context, dev.name, dev.context) == (
        "fruit-train", "train", "fruit-dev", "eval",
    )  # fmt: skip
    assert train.source_type == "local"
    assert json.loads(train.source) == {"uri": str(spec.train.path)}
    assert json.loads(dev.source) == {"uri": str(spec.dev.path)}
    assert train.profile == {
        "num_rows": 80,
        "sha256": sha256_file(spec.train.path),
        "data_sha256": spec_data_sha256(spec),  # as the task's registered versions are tagged
    }
    assert dev.profile["num_rows"] == 40 and len(train.digest) <= 36  # MLflow's limit
    # fewer rows drawn from the same file: another dataset (MLflow keeps one per name and
    # digest in an experiment, with the profile it was first logged with)
    fewer, same_dev = task_inputs(replace(spec, max_train_examples=20), 20, 40)
    assert fewer.digest != train.digest and same_dev.digest == dev.digest
    assert fewer.profile["num_rows"] == 20 and fewer.profile["max_examples"] == 20
    assert fewer.profile["seed"] == spec.seed
    # the same files in another folder: the same datasets
    shutil.copytree(tmp_path / "data", tmp_path / "moved")
    moved = task_inputs(_spec(tmp_path / "moved"), 80, 40)
    assert [r.digest for r in moved] == [train.digest, dev.digest]
    assert json.loads(moved[0].source)["uri"].startswith(str(tmp_path / "moved"))


def test_a_dev_split_held_out_of_train_and_a_hub_split(tmp_path: Path) -> None:
    folder = tmp_path / "data"
    held = _spec(folder, dev=None, dev_fraction=0.25)
    train, dev = task_inputs(held, 60, 20)
    assert json.loads(dev.source) == {"uri": str(held.train.path)}  # carved out of train
    assert dev.profile["dev_fraction"] == 0.25 and dev.profile["num_rows"] == 20
    sliced = _spec(folder, train={"path": "fruit_train.tsv", "rows": [0, 50]})
    assert task_inputs(sliced, 50, 40)[0].profile["rows"] == [0, 50]
    hub = TaskSpec.from_mapping(
        "rte",
        {"hub": "glue", "hub_config": "rte", "train": "train", "dev": "validation",
         "text_fields": ["sentence1", "sentence2"], "label_names": ["yes", "no"]},
        folder,
    )  # fmt: skip
    train, dev = task_inputs(hub, 2490, 277)
    assert train.source_type == "hugging_face"
    assert json.loads(dev.source) == {"path": "glue", "config_name": "rte", "split": "validation"}
    assert dev.profile == {"num_rows": 277}


def test_a_run_gets_its_inputs_once_and_a_refusal_is_said_not_raised(tmp_path: Path) -> None:
    from mlflow import MlflowClient

    uri = default_tracking_uri(tmp_path / "store")
    run = open_trial_run(uri, ensure_experiment(uri, "inputs"), None, "t1")
    records = task_inputs(_spec(tmp_path / "data"), 80, 40)
    said: list[str] = []
    log_dataset_inputs(run, records, said.append)
    log_dataset_inputs(run, records, said.append)  # a resumed trial opens its run again
    inputs = MlflowClient(uri).get_run(run.run_id).inputs.dataset_inputs
    assert sorted((i.dataset.name, i.tags[0].value) for i in inputs) == [
        ("fruit-dev", "eval"),
        ("fruit-train", "train"),
    ]
    assert json.loads(inputs[0].dataset.profile)["num_rows"] in (80, 40) and said == []
    MlflowClient(uri).delete_run(run.run_id)  # a store that refuses: the job goes on
    fewer = task_inputs(_spec(tmp_path / "data", max_train_examples=10), 10, 40)
    log_dataset_inputs(run, fewer, said.append)
    assert len(said) == 1, said
    assert said[0].startswith(f"could not log the datasets of MLflow run {run.run_id}")
