"""What the fusion stage records in MLflow, held to what a trial records: the world's fusion
(tests/prediction/conftest.py) was trained and registered by the real fusion job."""

from __future__ import annotations

from adapterfleet.registry import TAG_TASK, fusion_model_name, get_version


def test_a_search_by_task_finds_the_fusion_versions_beside_the_adapters(world) -> None:
    """Adapter versions carried `adapterfleet.task`, fusion versions did not: a search of the
    registry by task found only adapters."""
    from mlflow import MlflowClient

    name = fusion_model_name(world.config.registry_prefix, "fruit")
    fusion = get_version(world.uri, name, version=1)
    assert fusion is not None and fusion.tags[TAG_TASK] == "fruit"
    client = MlflowClient(world.uri, registry_uri=world.uri)
    found = client.search_model_versions(f"tags.`{TAG_TASK}` = 'fruit'")
    assert {v.name for v in found} >= {name, f"{world.config.registry_prefix}.adapter.fruit"}


def test_the_fusion_run_is_named_by_its_target_seed_and_lineage(world) -> None:
    """Every fusion run of a target was named `fusion-<target>`: the seeds of one fusion, and
    the fusions of other adapter versions, read the same in the runs table."""
    from mlflow import MlflowClient

    from adapterfleet.registry.tags import TAG_LINEAGE_KEY

    name = fusion_model_name(world.config.registry_prefix, "fruit")
    fusion = get_version(world.uri, name, version=1)
    assert fusion is not None
    run = MlflowClient(world.uri).get_run(fusion.run_id)
    key = fusion.tags[TAG_LINEAGE_KEY]
    assert run.info.run_name == f"fusion-fruit-s0-{key[:12]}"
    assert run.data.tags["adapterfleet.trial_id"] == f"fusion-fruit-{key[:12]}"  # its id


def test_the_fusion_run_logs_its_best_epoch_and_result_at_that_step_as_a_trial(world) -> None:
    """A trial logs `best_epoch` and `best_dev_<metric>` at step = its best epoch; a fusion
    logged `best_dev_<metric>` at step 0 and no `best_epoch` (only its run.json had it)."""
    import json

    from mlflow import MlflowClient

    name = fusion_model_name(world.config.registry_prefix, "fruit")
    fusion = get_version(world.uri, name, version=1)
    assert fusion is not None
    client = MlflowClient(world.uri)
    best = json.loads((world.fusion_run / "run" / "run.json").read_text())["fit"]["best_epoch"]
    assert best >= 1
    for key in ("best_epoch", "best_dev_accuracy"):
        history = client.get_metric_history(fusion.run_id, key)
        assert [m.step for m in history] == [best], key
    assert client.get_metric_history(fusion.run_id, "best_epoch")[0].value == best
    dev = {m.step: m.value for m in client.get_metric_history(fusion.run_id, "dev_accuracy")}
    assert client.get_run(fusion.run_id).data.metrics["best_dev_accuracy"] == dev[best]


def test_the_fusion_run_names_the_target_data_it_trained_and_was_scored_on(world) -> None:
    import json

    from mlflow import MlflowClient

    name = fusion_model_name(world.config.registry_prefix, "fruit")
    fusion = get_version(world.uri, name, version=1)
    assert fusion is not None
    inputs = MlflowClient(world.uri).get_run(fusion.run_id).inputs.dataset_inputs
    found = {i.dataset.name: json.loads(i.dataset.profile) for i in inputs}
    assert sorted(found) == ["fruit-dev", "fruit-train"]
    assert (found["fruit-train"]["num_rows"], found["fruit-dev"]["num_rows"]) == (80, 40)
    assert found["fruit-dev"]["data_sha256"] == fusion.tags["data_sha256"]
