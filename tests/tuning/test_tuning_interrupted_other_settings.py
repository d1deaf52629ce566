"""An interrupted sweep, and a command of other settings (its `-o` left out).

Bob ran `run pipe.yaml -o adapters.training.max_epochs=3` and pressed Ctrl-C; then
`sweep resume pipe.yaml`, without the -o: its settings were those of the adapters registered
before, so it skipped every task, exited 0 and took the interrupted mark off. Now `sweep resume`
(and `run --resume`) refuse, naming the -o to pass, and leave the mark on; a plain `run` says
the same in a line, once (the mark is then off), and goes on with its own settings. Real SQLite
store; nothing here trains, so no Ray.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from tuning_support import config_document, leave_interrupted, write_config
from typer.testing import CliRunner

from adapterfleet.cli.app import app
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
from adapterfleet.registry.tags import TAG_CONFIG_HASH, TAG_INTERRUPTED, TAG_OVERRIDES
from adapterfleet.tuning.spec import SweepError, sweep_hash, task_config_hash

THREE = "adapters.training.max_epochs=3"


def _register(uri: str, experiment: str, config, folder: Path) -> None:
    """Every task's adapter registered (@best) for `config`'s settings by a finished sweep."""
    digest = sweep_hash({t: task_config_hash(config, t) for t in config.adapter_tasks})
    for task in config.adapter_tasks:
        sweep = open_sweep_run(uri, experiment, f"tinysweep-{digest[:8]}-20250101T000000", task)
        sweep.end("FINISHED")
        weights = folder / task / "adapter.safetensors"
        weights.parent.mkdir(parents=True)
        weights.write_bytes(task.encode())
        trial = open_trial_run(uri, experiment, sweep.run_id, f"{task}-best")
        trial.log_artifacts(weights.parent, "adapter")
        trial.end("FINISHED")
        tags = {TAG_CONFIG_HASH: task_config_hash(config, task)}
        name = adapter_model_name(config.registry_prefix, task)
        register_version(uri, name, trial.run_id, "adapter", weights, tags)


def _interrupt(uri: str, experiment: str, config) -> str:
    """A sweep of `config` started with `-o THREE`, stopped by Ctrl-C: its runs KILLED, its
    folder's note in place, the experiment marked. Its name."""
    from adapterfleet.tuning.settings import settings_tag

    hashes = {t: task_config_hash(config, t) for t in config.adapter_tasks}
    name = f"tinysweep-{sweep_hash(hashes)[:8]}-20260101T000000"
    for task in config.adapter_tasks:
        tags = {TAG_OVERRIDES: json.dumps([THREE])}  # `command_tags`, as `run -o` sets them
        open_sweep_run(uri, experiment, name, task, tags=tags).end("KILLED")
    settings = {t: settings_tag(config, t) for t in config.adapter_tasks}
    leave_interrupted(config, uri, experiment, name, sweep_hash(hashes), settings)
    return name


@pytest.fixture
def pipe(tmp_path: Path, tiny_model: Path) -> tuple[Path, str, str]:
    """pipe.yaml with both tasks registered for its own settings, and a sweep of `-o THREE`
    interrupted since: (the config file, the store, the interrupted sweep's name)."""
    uri = default_tracking_uri(tmp_path / "mlruns")
    path = write_config(tmp_path, {**config_document(tmp_path, tiny_model), "tracking_uri": uri})
    plain, three = load_config(path), load_config(path, [THREE])
    experiment = ensure_experiment(uri, plain.name)
    _register(uri, experiment, plain, tmp_path / "weights")
    return path, uri, _interrupt(uri, experiment, three)


def _marked(uri: str) -> bool:
    experiment = get_client(uri).get_experiment_by_name("tinysweep")
    return TAG_INTERRUPTED in experiment.tags


def _line(name: str) -> str:
    return (
        f"the interrupted sweep {name} was started with -o {THREE}; this command's settings "
        "differ (adapters.training.max_epochs: 3 → 2), so it is not resumed: run it again with "
        f"the same -o/--budget (-o {THREE}) to continue it"
    )


def test_sweep_resume_without_the_o_of_the_interrupted_sweep_is_refused(pipe) -> None:
    from adapterfleet.tuning.plan import check_resumable

    path, uri, name = pipe
    result = CliRunner().invoke(app, ["sweep", "resume", str(path)])
    assert result.exit_code == 2, result.output
    said = " ".join(result.output.split())  # the error line, however the terminal wrapped it
    assert f"error: nothing to resume for these settings: {_line(name)}" in said
    assert "already registered" not in said
    assert _marked(uri)  # `status` still says it was interrupted
    with pytest.raises(SweepError, match="nothing to resume for these settings"):
        check_resumable(load_config(path), uri)  # `run --resume`, before anything is written


def test_a_plain_run_of_other_settings_says_so_once(pipe) -> None:
    from adapterfleet.orchestration.sweep import run_adapter_stage
    from adapterfleet.tuning.plan import plan_sweep

    path, uri, name = pipe
    said: list[str] = []
    registered = run_adapter_stage(load_config(path), progress=said.append)
    assert sorted(registered) == ["fruit", "water"]  # nothing to train for these settings
    assert said[0] == _line(name)
    assert said[1:] == [
        f"task {task}: already registered as tinysweep.adapter.{task} v1, skipped"
        for task in ("fruit", "water")
    ]
    assert not _marked(uri)  # said: the next run does not say it again
    assert run_adapter_stage(load_config(path), progress=said.append) == registered
    assert not any("interrupted sweep" in line for line in said[3:]), said
    three = load_config(path, [THREE])  # the same -o: resumed all the same, no such line
    plan = plan_sweep(three, uri, "0")
    assert plan.restore and plan.sweep_name == name and plan.interrupted is None


def test_status_does_not_call_runs_begun_after_the_mark_stopped(pipe) -> None:
    """The mark stays on while a sweep of other settings runs: its trials are running."""
    from adapterfleet.registry import open_trial_run as trial
    from adapterfleet.results.status import pipeline_status

    path, uri, _ = pipe
    config = load_config(path)
    experiment = get_client(uri).get_experiment_by_name("tinysweep").experiment_id
    time.sleep(0.01)
    sweep = open_sweep_run(uri, experiment, "tinysweep-00000000-20260101T000001", "fruit")
    trial(uri, experiment, sweep.run_id, "fruit-rf4-lr0.01-s0")  # RUNNING
    status = pipeline_status(config, uri)
    assert status.interrupted.startswith("interrupted ")
    assert "2 trials" not in status.interrupted and "1 trial" not in status.interrupted


def test_a_config_file_changed_since_is_named_as_the_difference(
    pipe, tmp_path: Path, tiny_model: Path
) -> None:
    """The same command after the file changed (a task taken out) was told to run again "with
    the same -o/--budget (-o ...)", which it had: nothing said that the file changed."""
    from adapterfleet.tuning.plan import plan_sweep

    path, uri, name = pipe
    document = {**config_document(tmp_path, tiny_model), "tracking_uri": uri}  # pipe's, less water
    del document["tasks"]["water"]
    (tmp_path / "fewer").mkdir()
    fewer = load_config(write_config(tmp_path / "fewer", document), [THREE])
    plan = plan_sweep(fewer, uri, "0")
    assert not plan.restore and plan.interrupted is not None
    assert plan.interrupted.line() == (
        f"the interrupted sweep {name} was started with this command's -o/--budget (-o {THREE}), "
        "but the config's settings changed since (tasks: water removed), so it is not resumed: "
        "run the config as it was then to continue it"
    )
    from adapterfleet.tuning.interrupted_sweep import InterruptedSweep

    plain = InterruptedSweep(name, (), None, ["tasks: water removed"], same_flags=True)
    assert plain.line().startswith(  # it said "with this command's -o/--budget", of none
        f"the interrupted sweep {name} was started with no -o or --budget, as this command, but "
        "the config's settings changed since (tasks: water removed)"
    )


def test_status_counts_the_stopped_trials_its_table_shows_and_names_their_o(pipe) -> None:
    """`status` of the plain config after a sweep started with `-o` was interrupted said "run
    the same command again", which was another command; and it counted every KILLED trial of
    the experiment, an earlier abandoned sweep's too: "3 trials stopped" beside a table of 2."""
    from adapterfleet.results.status import pipeline_status

    path, uri, name = pipe
    client = get_client(uri)
    experiment = client.get_experiment_by_name("tinysweep").experiment_id
    earlier = {"adapterfleet.kind": "sweep", "adapterfleet.task": "fruit"}
    earlier["adapterfleet.sweep"] = "tinysweep-99999999-20240101T000000"
    old = client.create_run(experiment, start_time=1704067200000, tags=earlier)  # 2024
    open_trial_run(uri, experiment, old.info.run_id, "fruit-rf8-lr0.01-s0").end("KILLED")
    client.set_terminated(old.info.run_id, "KILLED")
    found = client.search_runs([experiment], f"tags.`adapterfleet.sweep` = '{name}'")
    stopped = {run.data.tags["adapterfleet.task"]: run.info.run_id for run in found}
    open_trial_run(uri, experiment, stopped["fruit"], "fruit-rf4-lr0.01-s0").end("KILLED")
    time.sleep(0.01)  # the mark after every run: the runs it stopped began before it
    client.set_experiment_tag(experiment, TAG_INTERRUPTED, str(int(time.time() * 1000)))
    said = pipeline_status(load_config(path), uri).interrupted
    assert said.endswith(
        f": 1 trial stopped mid-way (counted as pending); run the same command again (it had -o "
        f"{THREE}) to continue"
    ), said


def test_another_storages_interrupted_sweep_is_said_as_such_and_stays_marked(
    pipe, tmp_path: Path
) -> None:
    """Carol's config shares Alice's pipeline name, on another storage. After Alice's Ctrl-C,
    Carol's run told her to run again with Alice's -o to continue a sweep whose folders are in
    Alice's storage, and took the interrupted mark off, so Alice's `status` no longer said it."""
    from adapterfleet.orchestration.sweep import run_adapter_stage

    path, uri, name = pipe
    carol = load_config(path, [f"storage={tmp_path / 'carol-runs'}"])
    said: list[str] = []
    run_adapter_stage(carol, progress=said.append)  # both registered for these settings
    assert said[0] == (
        f"the interrupted sweep {name} left no folder under this config's storage "
        f"({tmp_path / 'carol-runs'}): another config of this pipeline name, with another "
        "storage, ran it (or its folders were deleted), and it stays marked interrupted for "
        "that one; give this config its own name (-o name=...) to keep the two apart"
    )
    assert _marked(uri)


def test_status_from_python_is_what_the_cli_prints(pipe) -> None:
    """A notebook's `pipeline_status(config, uri)` left out the lines on versions trained with
    other settings that `status -c` prints; `config_status` is the CLI's own."""
    from adapterfleet.orchestration.report_scope import config_status

    path, uri, _ = pipe
    three = load_config(path, [THREE])
    printed = CliRunner().invoke(app, ["status", str(path), "-o", THREE])
    assert printed.exit_code == 0, printed.output
    shown = config_status(three).render()
    assert "was trained with other settings than this config's" in shown, shown
    assert printed.output.rstrip("\n") == shown.rstrip("\n")
