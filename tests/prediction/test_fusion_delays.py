"""The fusion run's gate delays (`training_start_delay_s`, `first_step_delay_s`) measure how
soon a fusion starts after its last adapter is registered. The world's fusion job began after
its adapters were registered (as a re-run of a pipeline whose fusion had not finished): it
waited for nothing, so no delay is logged; it once logged the whole pause between the runs.
The pipeline's own measure of them: tests/pipeline/test_pipeline_run.py."""

from __future__ import annotations

from adapterfleet.registry import fusion_model_name, get_version


def test_a_fusion_over_adapters_registered_before_it_began_logs_no_gate_delay(world) -> None:
    from mlflow import MlflowClient

    name = fusion_model_name(world.config.registry_prefix, "fruit")
    fusion = get_version(world.uri, name, version=1)
    assert fusion is not None
    metrics = MlflowClient(world.uri).get_run(fusion.run_id).data.metrics
    assert "best_dev_accuracy" in metrics  # the run's own metrics are there
    assert "training_start_delay_s" not in metrics and "first_step_delay_s" not in metrics
