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


def _register(uri: str, config, task: str, folder: Path, sweep: str, **more: str):
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
    tags = {TAG_CONFIG_HASH: task_config_hash(config, task), TAG_SWEEP: sweep, **more}
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
    from adapterfleet.registry.info import made_by
    from adapterfleet.results.status import pipeline_status
    from adapterfleet.tuning.settings import best_now, other_settings, say_taken

    uri, alice, carol, folder = shared
    carol = load_config(  # other settings: a version of its own
        folder / "pipeline.yaml",
        ["name=carol", "registry_prefix=tinysweep", "adapters.training.max_epochs=3"],
    )
    name = adapter_model_name("tinysweep", "fruit")
    taken = best_now(uri, name)  # what the registrar reads first
    assert taken is not None and taken.version == 1
    assert made_by(taken.tags, carol.name) == "tinysweep" and not made_by(taken.tags, alice.name)
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


def test_best_moved_off_a_better_version_of_the_same_data_is_noted(shared) -> None:
    """A quick re-run with a learning rate that did not learn moved `@best`, which predict,
    pull and the next fusion take, from v1 at 0.75 to v2 at 0.26 without a word."""
    from adapterfleet.tuning.settings import best_now, say_taken

    uri, alice, _, folder = shared
    worse = load_config(folder / "pipeline.yaml", ["adapters.training.max_epochs=3"])
    scored = {"metric": "accuracy", "data_sha256": "d1"}
    first = _register(uri, alice, "fruit", folder, "tinysweep-1-20260103T000000",
                      metric_value="0.75", **scored)  # fmt: skip
    said: list[str] = []
    for sweep, value, data, noted in (
        ("tinysweep-2-20260104T000000", "0.26", "d1", True),
        ("tinysweep-3-20260105T000000", "0.30", "d1", False),  # better than the one it leaves
        ("tinysweep-4-20260106T000000", "0.10", "d2", False),  # other dev rows: not ranked
    ):
        taken = best_now(uri, first.name)
        info = _register(uri, worse, "fruit", folder, sweep, metric_value=value,
                         **{**scored, "data_sha256": data})  # fmt: skip
        said.clear()
        say_taken(said.append, "fruit", worse, taken, info)
        assert bool(said) is noted, (sweep, said)
        if noted:
            assert said == [
                f"task fruit: note: @best moves here from v{taken.version} (dev accuracy 0.7500, "
                f"better than this version's 0.2600), which was trained for other settings; "
                f"v{taken.version} stays registered, and a run with its settings puts @best back "
                "on it"
            ]


def test_a_skip_that_moves_another_pipelines_best_back_warns_and_names_whose_fix(shared) -> None:
    """Carol's run (Alice's v1 settings, Alice's prefix) put Alice's @best back from her v2 on
    v1 with only `@best is v1 again (...)`: no warning, though the README promises one where a
    run moves another pipeline's @best. And the warning Alice's own runs say named a fix that
    changes nothing (`-o registry_prefix=tinysweep`, her prefix already): it is Carol's."""
    from adapterfleet.orchestration.sweep import run_adapter_stage
    from adapterfleet.tuning.settings import best_now, say_taken

    uri, alice, carol, folder = shared
    other = load_config(folder / "pipeline.yaml", ["adapters.training.max_epochs=3"])
    second = _register(uri, other, "fruit", folder, "tinysweep-4567cdef-20260102T000000")
    assert best_now(uri, second.name).version == 2  # Alice's own better settings
    said: list[str] = []
    run_adapter_stage(carol, progress=said.append)
    assert said[0].endswith(
        "@best is v1 again (it was on v2, registered for other settings or data)"
    )
    assert said[1] == (
        "task fruit: warning: @best of tinysweep.adapter.fruit was v2, made by pipeline "
        "'tinysweep', and is now v1, which it made too: the two share registry_prefix "
        "'tinysweep'; give this pipeline its own registry_prefix (e.g. -o registry_prefix=carol) "
        "to leave the other's models alone"
    )
    changes = ["name=carol", "registry_prefix=tinysweep", "adapters.training.max_epochs=3"]
    theirs = _register(uri, load_config(folder / "pipeline.yaml", changes), "water", folder,
                       "carol-89abcdef-20260103T000000")  # fmt: skip
    back = _register(uri, other, "water", folder, "tinysweep-fedcba98-20260104T000000")
    said.clear()  # Alice's run takes @best back from Carol's version: the fix is Carol's
    say_taken(said.append, "water", alice, theirs, back)
    assert said == [
        f"task water: warning: @best of tinysweep.adapter.water was v{theirs.version}, made by "
        f"pipeline 'carol', and is now this pipeline's v{back.version}: the two share "
        "registry_prefix 'tinysweep'; give pipeline 'carol' its own registry_prefix "
        "(registry_prefix: carol in its config) to keep the two pipelines' models apart"
    ]
