"""A sweep an earlier adapterfleet started, then interrupted, read after the upgrade.

Earlier versions hashed a task's settings with its data files' paths in (`task_config_hashes`
keeps that hash as the second). After an upgrade, the same command was told its settings
differed from the interrupted sweep's and started a new one (every unfinished trial's epochs
lost); `clean` then kept the old sweep for good ("the same command resumes it"); and the
settings a version records were said to differ by the paths alone, the real change hidden in
"and 2 more". Real SQLite store; nothing here trains, so no Ray.
"""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest
from tuning_support import config_document, leave_interrupted, write_config

from adapterfleet.config import load_config
from adapterfleet.registry import (
    adapter_model_name,
    default_tracking_uri,
    ensure_experiment,
    open_sweep_run,
    open_trial_run,
    register_version,
)
from adapterfleet.registry.store import get_client
from adapterfleet.registry.tags import TAG_CONFIG_HASH
from adapterfleet.tuning.spec import sweep_hash, task_config_hashes, task_settings


def _earlier_form(config, task: str) -> str:
    """The settings tag of `task` as an earlier version wrote it (the paths in, no name)."""
    return json.dumps(task_settings(config, task, by_path=True), sort_keys=True, default=str)


def _interrupt_as_earlier(uri: str, experiment: str, config) -> str:
    """A sweep of `config` that an earlier version started and Ctrl-C stopped: its name."""
    earlier = {t: task_config_hashes(config, t)[-1] for t in config.adapter_tasks}
    name = f"tinysweep-{sweep_hash(earlier)[:8]}-20260101T000000"
    for task in config.adapter_tasks:
        tags = {TAG_CONFIG_HASH: earlier[task]}
        open_sweep_run(uri, experiment, name, task, tags=tags).end("KILLED")
    settings = {t: _earlier_form(config, t) for t in config.adapter_tasks}
    leave_interrupted(config, uri, experiment, name, sweep_hash(earlier), settings)
    return name


@pytest.fixture
def upgraded(tmp_path: Path, tiny_model: Path):
    """(the config, the store, the earlier version's interrupted sweep's name, the file)."""
    uri = default_tracking_uri(tmp_path / "mlruns")
    path = write_config(tmp_path, {**config_document(tmp_path, tiny_model), "tracking_uri": uri})
    config = load_config(path)
    assert len(set(task_config_hashes(config, "fruit"))) == 2  # the earlier form differs
    experiment = ensure_experiment(uri, config.name)
    return config, uri, _interrupt_as_earlier(uri, experiment, config), path


def test_the_same_command_resumes_an_earlier_versions_interrupted_sweep(upgraded) -> None:
    from adapterfleet.tuning.plan import check_resumable, plan_sweep

    config, uri, name, _ = upgraded
    check_resumable(config, uri)  # `sweep resume`: "nothing to resume for these settings"
    plan = plan_sweep(config, uri, "0")
    assert plan.restore and plan.sweep_name == name and plan.interrupted is None


def test_clean_takes_an_earlier_versions_sweep_once_its_tasks_are_registered(
    upgraded, tmp_path: Path
) -> None:
    """A new sweep registered both tasks, for the same settings hashed as this version does:
    the old sweep resumes nothing, so it is scratch, not `kept ... the same command resumes it`."""
    from adapterfleet.orchestration.clean import plan_clean

    config, uri, name, _ = upgraded
    experiment = get_client(uri).get_experiment_by_name("tinysweep").experiment_id
    for task in config.adapter_tasks:
        sweep = open_sweep_run(uri, experiment, "tinysweep-00000000-20260102T000000", task)
        sweep.end("FINISHED")
        weights = tmp_path / "weights" / task / "adapter.safetensors"
        weights.parent.mkdir(parents=True)
        weights.write_bytes(task.encode())
        trial = open_trial_run(uri, experiment, sweep.run_id, f"{task}-best")
        trial.log_artifacts(weights.parent, "adapter")
        trial.end("FINISHED")
        tags = {TAG_CONFIG_HASH: task_config_hashes(config, task)[0]}
        model = adapter_model_name(config.registry_prefix, task)
        register_version(uri, model, trial.run_id, "adapter", weights, tags)
    plan = plan_clean(config)
    assert not any(name in line for line in plan.kept), plan.kept
    assert any(name in item.why for item in plan.scratch), plan.scratch


def test_settings_recorded_in_the_earlier_form_name_only_what_changed(upgraded) -> None:
    from adapterfleet.tuning.settings import changed_settings

    config, _, _, path = upgraded
    four = load_config(path, ["adapters.training.max_epochs=4"])
    assert changed_settings(four, "fruit", _earlier_form(config, "fruit")) == [
        "adapters.training.max_epochs: 2 → 4"
    ]


def test_a_callback_an_earlier_version_pickled_is_restored_whole() -> None:
    """Tune pickles its callbacks with the experiment and restores them with a sweep. The
    upgraded driver's restored callback had only the earlier version's attributes, and the
    resume ended in `AttributeError: ... no attribute 'stall'`. Unpickling an object whose
    class defines `__setstate__` hands it the pickled `__dict__`, as here."""
    from adapterfleet.tuning.progress import Stall
    from adapterfleet.tuning.registration import RegistrationCallback

    restored = RegistrationCallback.__new__(RegistrationCallback)
    restored.__setstate__({"sweep_name": "tinysweep-aaaa1111-20260101T000000"})  # no `stall`
    assert restored.sweep_name == "tinysweep-aaaa1111-20260101T000000"
    assert isinstance(restored.stall, Stall)
    again = pickle.loads(pickle.dumps(restored))
    assert again.sweep_name == restored.sweep_name and isinstance(again.stall, Stall)


def test_status_names_an_earlier_versions_sweep_of_other_settings(upgraded, tmp_path) -> None:
    """After the upgrade, `status` of a config of other settings than the interrupted sweep
    (which recorded no -o) said `run the same command again to continue`: another command."""
    from adapterfleet.orchestration.report_scope import config_status

    config, _, name, path = upgraded
    same = config_status(config).interrupted
    assert same.endswith("; run the same command again to continue"), same  # its settings
    four = load_config(path, ["adapters.training.max_epochs=4"])
    assert config_status(four).interrupted.endswith(
        f": sweep {name}, of other settings than this config's; run the command that started "
        "it again to continue it"
    )
