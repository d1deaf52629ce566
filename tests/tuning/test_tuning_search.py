"""Optuna search and ASHA early stopping, per task: the scheduler and the searcher on real Tune
trials, the Tune options a config gives, and one real sweep (local Ray, SQLite MLflow, tiny BERT):
2 tasks × 3 Optuna trials, 3 epochs, ASHA after the first epoch.
"""

from __future__ import annotations

import pickle
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from ray.tune.experiment import Trial
from ray.tune.schedulers import AsyncHyperBandScheduler, TrialScheduler
from tuning_support import config_document, runs_of

from adapterfleet.config import ConfigError, PipelineConfig, parse_config
from adapterfleet.orchestration.sweep import run_adapter_stage
from adapterfleet.registry import ModelVersionInfo
from adapterfleet.registry.tags import TAG_STOPPED_EARLY
from adapterfleet.results.status import pipeline_status
from adapterfleet.tuning.search import (
    PerTaskScheduler,
    PerTaskSearcher,
    SearchSpace,
    tune_options,
)

METRIC = "best_dev_accuracy"
CONTINUE, STOP = TrialScheduler.CONTINUE, TrialScheduler.STOP
TASKS = ("fruit", "water")


def _trial(task: str, name: str) -> Trial:
    return Trial("adapter_trial", config={"task": task}, trial_id=name, stub=True)


def _epoch(value: float, epoch: int = 1) -> dict[str, Any]:
    return {"epoch": epoch, METRIC: value, "training_iteration": epoch}


def _scheduler(*trials: Trial) -> PerTaskScheduler:
    scheduler = PerTaskScheduler({"a": 4, "b": 4}, grace_period=1, reduction=2)
    assert scheduler.set_search_properties(METRIC, "max")
    for trial in trials:
        scheduler.on_trial_add(None, trial)
    return scheduler


def test_asha_compares_a_trial_with_its_own_task_only() -> None:
    a1, a2, b1, b2 = (_trial(t, f"{t}{i}") for t in "ab" for i in (1, 2))
    scheduler = _scheduler(a1, a2, b1, b2)
    assert scheduler.on_trial_result(None, a1, _epoch(0.9)) == CONTINUE
    assert scheduler.on_trial_result(None, b1, _epoch(0.1)) == CONTINUE  # b's first at the rung
    assert scheduler.on_trial_result(None, a2, _epoch(0.5)) == STOP  # below a1
    assert scheduler.on_trial_result(None, b2, _epoch(0.2)) == CONTINUE  # above b1, below a1
    b3 = _trial("b", "b3")
    scheduler.on_trial_add(None, b3)
    assert scheduler.on_trial_result(None, b3, _epoch(0.05)) == STOP  # below b's own two
    # One ASHA over both tasks stops b1 at once: a1's 0.9 sets the cutoff.
    shared = AsyncHyperBandScheduler("epoch", METRIC, "max", max_t=4, reduction_factor=2)
    shared.on_trial_add(None, a1)
    shared.on_trial_add(None, b1)
    assert shared.on_trial_result(None, a1, _epoch(0.9)) == CONTINUE
    assert shared.on_trial_result(None, b1, _epoch(0.1)) == STOP


def test_asha_leaves_the_last_epoch_and_the_final_report_alone() -> None:
    a1, a2 = _trial("a", "a1"), _trial("a", "a2")
    scheduler = _scheduler(a1, a2)
    assert scheduler.on_trial_result(None, a1, _epoch(0.9, epoch=4)) == CONTINUE  # max_t
    final = {METRIC: 0.1, "final": 1, "training_iteration": 5}  # no epoch: not judged
    assert scheduler.on_trial_result(None, a2, final) == CONTINUE
    scheduler.on_trial_complete(None, a1, _epoch(0.9, epoch=4))
    scheduler.on_trial_remove(None, a2)
    assert "a: Using AsyncHyperBand" in scheduler.debug_string()


def test_the_scheduler_pickles_and_restores_with_its_rungs(tmp_path: Path) -> None:
    a1, a2, b1 = _trial("a", "a1"), _trial("a", "a2"), _trial("b", "b1")
    scheduler = _scheduler(a1, a2, b1)
    scheduler.on_trial_result(None, a1, _epoch(0.9))
    copy = pickle.loads(pickle.dumps(scheduler))  # Tune keeps it in tuner.pkl
    assert copy.on_trial_result(None, a2, _epoch(0.5)) == STOP
    scheduler.save(str(tmp_path / "scheduler.pkl"))
    fresh = PerTaskScheduler({"a": 4, "b": 4})
    fresh.restore(str(tmp_path / "scheduler.pkl"))
    assert fresh.on_trial_result(None, b1, _epoch(0.1)) == CONTINUE
    assert fresh.on_trial_result(None, a2, _epoch(0.5)) == STOP
    assert not fresh.set_search_properties(METRIC, "max")  # already set: Tune must not reset


def _searcher(num_samples: int = 3, space: SearchSpace | None = None) -> PerTaskSearcher:
    space = space or SearchSpace((4, 8), (0.01, 0.001))
    return PerTaskSearcher(("a", "b"), num_samples, space, (0, 1), METRIC, "max")


def _completed(searcher: PerTaskSearcher, task: str) -> int:
    study = searcher.study_of(task)._ot_study
    return sum(t.state.name == "COMPLETE" for t in study.trials)


def test_the_searcher_takes_the_tasks_in_turn_and_stops_at_num_samples() -> None:
    searcher = _searcher(num_samples=2)
    configs = [searcher.suggest(f"t{i}") for i in range(4)]
    assert [(c["task"], c["sample"], c["seed"]) for c in configs] == [
        ("a", 0, 0),
        ("b", 0, 0),
        ("a", 1, 1),
        ("b", 1, 1),
    ]
    assert all(
        c["reduction_factor"] in (4, 8) and c["learning_rate"] in (0.01, 0.001) for c in configs
    )
    assert searcher.suggest("t4") == PerTaskSearcher.FINISHED
    again = _searcher(num_samples=2)
    assert configs == [again.suggest(f"t{i}") for i in range(4)]  # the studies are seeded


def test_results_reach_only_their_tasks_study() -> None:
    searcher = _searcher()
    for name in ("t0", "t1", "t2"):  # a, b, a
        searcher.suggest(name)
    searcher.on_trial_result("t0", _epoch(0.7))
    searcher.on_trial_complete("t0", _epoch(0.8, epoch=2))
    searcher.on_trial_complete("t2", _epoch(0.6, epoch=2))
    searcher.on_trial_complete("unknown", _epoch(0.6))  # not one of ours: ignored
    assert (_completed(searcher, "a"), _completed(searcher, "b")) == (2, 0)


def test_the_searcher_resumes_where_it_was_saved(tmp_path: Path) -> None:
    searcher = _searcher()
    for name in ("t0", "t1", "t2"):
        searcher.suggest(name)
    searcher.on_trial_complete("t0", _epoch(0.8, epoch=2))
    searcher.save(str(tmp_path / "searcher.pkl"))
    fresh = _searcher()
    fresh.restore(str(tmp_path / "searcher.pkl"))
    assert _completed(fresh, "a") == 1
    following = [fresh.suggest(f"t{i}") for i in range(3, 6)]
    assert [(c["task"], c["sample"]) for c in following] == [("b", 1), ("a", 2), ("b", 2)]
    assert following == [searcher.suggest(f"t{i}") for i in range(3, 6)]
    assert fresh.suggest("t6") == PerTaskSearcher.FINISHED


def test_a_learning_rate_range_is_sampled_log_uniformly() -> None:
    searcher = _searcher(num_samples=5, space=SearchSpace((16,), (), (1e-4, 1e-2)))
    rates = [searcher.suggest(f"t{i}")["learning_rate"] for i in range(10)]
    assert all(1e-4 <= lr <= 1e-2 for lr in rates) and len(set(rates)) == 10


def _config(root: Path, **adapters: Any) -> PipelineConfig:
    return parse_config(config_document(root, root / "model", **adapters), root)


def test_tune_options_follow_the_config(tmp_path: Path) -> None:
    assert tune_options(_config(tmp_path), TASKS) == {"num_samples": 1}
    options = tune_options(
        _config(tmp_path, search="optuna", num_samples=3, scheduler="asha"), TASKS
    )
    assert options["num_samples"] == 6
    assert (options["metric"], options["mode"]) == ("objective", "max")
    assert isinstance(options["search_alg"], PerTaskSearcher)
    assert isinstance(options["scheduler"], PerTaskScheduler)
    grid_asha = tune_options(_config(tmp_path, scheduler="asha"), TASKS)
    assert "search_alg" not in grid_asha and grid_asha["num_samples"] == 1


def test_optuna_not_installed_is_one_line_naming_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "optuna", None)  # what find_spec sees when it is missing
    with pytest.raises(ConfigError) as error:
        _config(tmp_path, search="optuna")
    assert str(error.value) == (
        "adapters.search: optuna is not installed; pip install 'adapterfleet[optuna]'"
    )


@dataclass
class Swept:
    config: PipelineConfig
    uri: str
    registered: dict[str, ModelVersionInfo]
    lines: list[str]


@pytest.fixture(scope="module")
def swept(ray_local: None, tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Swept:
    root = tmp_path_factory.mktemp("search")
    document = config_document(
        root,
        tiny_model,
        search="optuna",
        num_samples=3,
        scheduler="asha",
        asha_grace_period=1,
        asha_reduction=2,
        # The first choice learns in an epoch, the second hardly moves: the seeded studies
        # pick fruit's third trial from the second, so ASHA has a slow trial to stop.
        learning_rates=[0.03, 0.0001],
        training={"max_epochs": 3, "batch_size": 16, "device": "cpu"},
    )
    config = parse_config(document, root)
    lines: list[str] = []
    registered = run_adapter_stage(config, progress=lines.append)
    return Swept(config, config.tracking_uri, registered, lines)


@pytest.mark.integration
def test_a_search_sweep_registers_the_best_finished_trial_of_each_task(swept: Swept) -> None:
    assert sorted(swept.registered) == list(TASKS)
    runs = runs_of(swept.uri, "trial")
    ids = sorted(r.data.tags["adapterfleet.trial_id"] for r in runs)
    pattern = re.compile(r"^(fruit|water)-n[012]-rf(4|8)-lr(0\.03|0\.0001)-s0$")
    assert len(ids) == 6 and all(pattern.match(i) for i in ids), ids
    for task in TASKS:
        finished = [
            r
            for r in runs
            if r.data.tags["adapterfleet.task"] == task and "best_epoch" in r.data.metrics
        ]
        best = max(r.data.metrics[METRIC] for r in finished)
        info = swept.registered[task]
        assert float(info.tags["metric_value"]) == round(best, 4)  # a tag: 4 decimals
        assert info.tags["adapterfleet.trial_id"] in {
            r.data.tags["adapterfleet.trial_id"] for r in finished
        }


@pytest.mark.integration
def test_asha_stopped_a_trial_and_registration_counted_it(swept: Swept) -> None:
    trial_lines = [line for line in swept.lines if re.match(r"trial \S+: ", line)]  # ended
    assert len(trial_lines) == 6, swept.lines
    for task in TASKS:
        mine = [line for line in trial_lines if line.startswith(f"trial {task}-")]
        assert [line.rsplit("[", 1)[1] for line in mine] == ["1/3]", "2/3]", "3/3]"]
    stopped = [line for line in trial_lines if "stopped early after epoch" in line]
    assert stopped, swept.lines
    # the first result at a rung meets no cutoff: a task's first trial to report its first epoch
    # (in Tune's order, not always n0) goes on past it
    firsts = {}
    for line in swept.lines:
        if found := re.match(r"trial ((\w+)-n\d\S*) epoch 1/", line):
            firsts.setdefault(found.group(2), found.group(1))
    assert sorted(firsts) == sorted(TASKS), swept.lines
    at_first_rung = [f"trial {t}: stopped early after epoch 1," for t in firsts.values()]
    assert not any(line.startswith(tuple(at_first_rung)) for line in stopped), swept.lines
    assert not any("not registered" in line for line in swept.lines)


@pytest.mark.integration
def test_a_trial_asha_stopped_ends_finished_and_status_counts_it_apart(swept: Swept) -> None:
    stopped = dict(
        re.findall(r"^trial (\S+): stopped early after epoch (\d+),", "\n".join(swept.lines), re.M)
    )
    assert stopped, swept.lines
    runs = {r.data.tags["adapterfleet.trial_id"]: r for r in runs_of(swept.uri, "trial")}
    for trial_id, run in runs.items():
        assert run.info.status == "FINISHED", (trial_id, run.info.status)
        assert run.data.tags.get(TAG_STOPPED_EARLY) == stopped.get(trial_id), trial_id
        assert ("best_epoch" in run.data.metrics) == (trial_id not in stopped), trial_id
    status = pipeline_status(swept.config, swept.uri)
    assert sum(t.stopped for t in status.tasks) == len(stopped)
    assert all((t.done + t.stopped, t.failed, t.pending) == (3, 0, 0) for t in status.tasks)
