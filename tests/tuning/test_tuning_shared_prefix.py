"""Two pipelines of one registry_prefix: Carol copied Alice's config and changed only `name`.

Carol's run skipped Alice's adapters as its own (`already registered as alice.adapter.x v1,
skipped`), a later run of other settings moved Alice's `@best` without a word, and Alice's
`status -c` blamed `another config of this pipeline name`. Now each line names the pipeline
that made the version. Real SQLite store; nothing trains, so no Ray.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from tuning_support import config_document, write_config

from adapterfleet.config import load_config
from adapterfleet.registry import (
    adapter_model_name,
    default_tracking_uri,
    ensure_experiment,
    open_sweep_run,
    open_trial_run,
    register_version,
)
from adapterfleet.registry.tags import TAG_CONFIG_HASH, TAG_SWEEP
from adapterfleet.tuning.spec import task_config_hash


def _register(uri: str, config, task: str, folder: Path, sweep: str):
    """`task`'s adapter registered (@best) for `config`'s settings by `config`'s sweep `sweep`."""
    experiment = ensure_experiment(uri, config.name)
    parent = open_sweep_run(uri, experiment, sweep, task)
    parent.end("FINISHED")
    weights = folder / sweep / task / "adapter.safetensors"
    weights.parent.mkdir(parents=True)
    weights.write_bytes(sweep.encode())
    trial = open_trial_run(uri, experiment, parent.run_id, f"{task}-best")
    trial.log_artifacts(weights.parent, "adapter")
    trial.end("FINISHED")
    tags = {TAG_CONFIG_HASH: task_config_hash(config, task), TAG_SWEEP: sweep}
    name = adapter_model_name(config.registry_prefix, task)
    return register_version(uri, name, trial.run_id, "adapter", weights, tags)


@pytest.fixture
def shared(tmp_path: Path, tiny_model: Path):
    """Alice's config (`tinysweep`, her adapters registered) and Carol's copy, named `carol`."""
    uri = default_tracking_uri(tmp_path / "mlruns")
    path = write_config(tmp_path, {**config_document(tmp_path, tiny_model), "tracking_uri": uri})
    alice = load_config(path)
    carol = load_config(path, ["name=carol", "registry_prefix=tinysweep"])
    for task in alice.adapter_tasks:
        _register(uri, alice, task, tmp_path, "tinysweep-0123abcd-20260101T000000")
    return uri, alice, carol, tmp_path


def test_a_skip_names_the_pipeline_that_registered_the_version(shared) -> None:
    from adapterfleet.orchestration.sweep import run_adapter_stage

    uri, _, carol, _ = shared
    said: list[str] = []
    run_adapter_stage(carol, progress=said.append)
    assert said == [
        f"task {task}: already registered as tinysweep.adapter.{task} v1 by pipeline "
        "'tinysweep', skipped"
        for task in ("fruit", "water")
    ]


def test_moving_another_pipelines_best_is_said_and_its_status_names_the_maker(shared) -> None:
    from adapterfleet.results.status import pipeline_status
    from adapterfleet.tuning.settings import best_of_another, other_settings, say_taken

    uri, alice, carol, folder = shared
    carol = load_config(  # other settings: a version of its own
        folder / "pipeline.yaml",
        ["name=carol", "registry_prefix=tinysweep", "adapters.training.max_epochs=3"],
    )
    name = adapter_model_name("tinysweep", "fruit")
    taken = best_of_another(uri, name, carol.name)  # what the registrar reads first
    assert taken is not None and taken.version == 1
    assert best_of_another(uri, name, alice.name) is None  # her own
    info = _register(uri, carol, "fruit", folder, "carol-4567cdef-20260102T000000")
    said: list[str] = []
    say_taken(said.append, "fruit", carol, taken, info)
    assert said == [
        "task fruit: warning: @best of tinysweep.adapter.fruit was v1, made by pipeline "
        "'tinysweep', and is now this pipeline's v2: the two share registry_prefix "
        "'tinysweep'; give this pipeline its own registry_prefix (e.g. -o registry_prefix=carol)"
        " to leave the other's models alone"
    ]
    status = pipeline_status(alice, uri, settings=lambda t, i: other_settings(alice, t, i))
    fruit = next(task for task in status.tasks if task.task == "fruit")
    assert fruit.note == (
        "adapter fruit v2 @best was trained with other settings than this config's: made by "
        "pipeline 'carol', which shares this config's registry_prefix"
    )
