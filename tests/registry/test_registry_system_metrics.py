import time

from mlflow import MlflowClient

from adapterfleet.registry import open_trial_run


def test_system_metrics_are_sampled_into_the_run_while_training(
    sqlite_uri, sqlite_experiment, new_name
):
    logger = open_trial_run(sqlite_uri, sqlite_experiment, None, new_name("sysmetrics"))
    with logger.system_metrics(interval_s=1.0, enabled=True):
        time.sleep(3.0)
    logger.end()
    keys = MlflowClient(sqlite_uri).get_run(logger.run_id).data.metrics
    assert any(key.startswith("system/cpu_utilization") for key in keys), sorted(keys)


def test_system_metrics_are_off_unless_mlflows_switch_turns_them_on(
    sqlite_uri, sqlite_experiment, new_name, monkeypatch
):
    # the UI lists a run's system metrics above its own: they are sampled only on request
    monkeypatch.delenv("MLFLOW_ENABLE_SYSTEM_METRICS_LOGGING", raising=False)
    logger = open_trial_run(sqlite_uri, sqlite_experiment, None, new_name("nosysmetrics"))
    with logger.system_metrics(interval_s=0.5):
        time.sleep(1.5)
    logger.end()
    assert not MlflowClient(sqlite_uri).get_run(logger.run_id).data.metrics
