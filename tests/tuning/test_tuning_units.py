"""The sweep's plain-data parts: trial ids, config hashes, best-trial choice and the plan's
refusals. No Ray cluster is started here. (A trial's folder: tests/training/
test_training_lifecycle.py.)"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest
from tuning_support import config_document, tune_state

from adapterfleet.config import PipelineConfig, Resources, parse_config
from adapterfleet.tuning.outcomes import TrialOutcome, choose_best
from adapterfleet.tuning.settings import changed_settings
from adapterfleet.tuning.spec import (
    GRID_KEYS,
    SweepError,
    TrialParams,
    grid,
    layout_tag,
    sweep_hash,
    task_config_hash,
    task_settings,
    trial_id,
)


@pytest.fixture
def config(tmp_path: Path, tiny_model: Path):
    return parse_config(config_document(tmp_path, tiny_model), tmp_path)


def test_grid_covers_task_rf_lr_seed_with_stable_ids(config) -> None:
    points = grid(config, config.adapter_tasks)
    assert [p.trial_id for p in points] == [
        "fruit-rf4-lr0.01-s0",
        "fruit-rf8-lr0.01-s0",
        "water-rf4-lr0.01-s0",
        "water-rf8-lr0.01-s0",
    ]
    for point in points:  # a Tune config round-trips to the same id
        assert TrialParams.from_config(point.to_config()).trial_id == point.trial_id
    assert trial_id("rte", 16, 1e-4, 2) == "rte-rf16-lr0.0001-s2"
    assert trial_id("rte", 16, 0.001, 0) != trial_id("rte", 16, 0.0011, 0)


def test_a_task_grid_gives_its_task_other_points_and_leaves_the_others_alone(
    tmp_path: Path, tiny_model: Path, config
) -> None:
    from adapterfleet.tuning.sweep import param_space

    own = {"water": {"reduction_factors": [16], "learning_rates": [0.02, 0.03]}}
    document = config_document(tmp_path, tiny_model, task_grid=own)  # same data as `config`
    with_grid = parse_config(document, tmp_path)
    points = grid(with_grid, with_grid.adapter_tasks)
    assert [p.trial_id for p in points] == [
        "fruit-rf4-lr0.01-s0",
        "fruit-rf8-lr0.01-s0",
        "water-rf16-lr0.02-s0",
        "water-rf16-lr0.03-s0",
    ]
    space = param_space(with_grid, with_grid.adapter_tasks)  # one Tune grid over the points
    assert list(space) == ["point"]
    listed = [TrialParams.from_config({"point": c}) for c in space["point"]["grid_search"]]
    assert listed == points
    assert task_config_hash(with_grid, "fruit") == task_config_hash(config, "fruit")
    assert task_config_hash(with_grid, "water") != task_config_hash(config, "water")
    assert list(param_space(config, config.adapter_tasks)) == list(GRID_KEYS)  # as before


def test_config_hash_follows_the_settings_that_decide_an_adapter(config) -> None:
    base = task_config_hash(config, "fruit")
    assert base == task_config_hash(config, "fruit")
    assert base != task_config_hash(config, "water")
    more_lrs = dataclasses.replace(
        config, adapters=dataclasses.replace(config.adapters, learning_rates=(0.01, 0.1))
    )
    assert task_config_hash(more_lrs, "fruit") != base
    longer = dataclasses.replace(config, max_length=config.max_length + 1)
    assert task_config_hash(longer, "fruit") != base
    # resources and the tracking store do not change what is trained
    other = dataclasses.replace(config, resources=Resources(2, 0), tracking_uri="sqlite:///x.db")
    assert task_config_hash(other, "fruit") == base
    hashes = {t: task_config_hash(config, t) for t in config.adapter_tasks}
    assert sweep_hash(hashes) != sweep_hash({**hashes, "fruit": "0" * 64})
    # min_epochs and cuda_graphs came later: at their defaults (cuda_graphs auto, or false as
    # before) they are left out, so hashes written before still match
    training = config.adapters.training
    assert training.hash_dict() == {
        k: v for k, v in training.to_dict().items() if k not in ("min_epochs", "cuda_graphs")
    }
    unchanged = dataclasses.replace(training, cuda_graphs=False)
    assert unchanged.hash_dict() == training.hash_dict()
    for later in ({"min_epochs": 5}, {"cuda_graphs": True, "device": "cuda"}):
        held = dataclasses.replace(training, **later)
        held_config = dataclasses.replace(
            config, adapters=dataclasses.replace(config.adapters, training=held)
        )
        assert task_config_hash(held_config, "fruit") != base


def test_a_declared_layout_is_part_of_the_hash_and_its_change_is_named(config) -> None:
    """The second `run` with `-o base_model_layout.norm=post` said "already registered,
    skipped" and kept the adapter trained for pre-norm; a config declaring none keeps the
    hashes written before the layout was part of them."""
    assert "base_model_layout" not in task_settings(config, "fruit")
    layout = {
        "layers": "encoder.layer", "attention_output": "attention.output.dropout",
        "attention_norm": "attention.output.LayerNorm", "ffn_output": "output.dropout",
        "ffn_norm": "output.LayerNorm", "norm": "pre",
    }  # fmt: skip

    def declaring(**changes: str) -> PipelineConfig:
        items = tuple(sorted({**layout, **changes}.items()))
        return dataclasses.replace(config, base=dataclasses.replace(config.base, layout=items))

    pre, post = declaring(), declaring(norm="post")
    hashes = {task_config_hash(c, "fruit") for c in (config, pre, post)}
    assert len(hashes) == 3
    recorded = json.dumps(task_settings(pre, "fruit"), default=str)
    assert changed_settings(post, "fruit", recorded) == ['base_model_layout.norm: "pre" → "post"']
    assert layout_tag(config) == "built-in"
    assert json.loads(layout_tag(post)) == {**layout, "norm": "post"}


def _outcome(task: str, rf: int, value: float, lr: float = 0.01) -> TrialOutcome:
    result = {"best_dev_accuracy": value, "final": 1}
    return TrialOutcome(TrialParams(task, rf, lr, 0), "finished", result)


def test_choose_best_takes_the_highest_metric_then_the_smaller_rf() -> None:
    assert choose_best([_outcome("t", 4, 0.7), _outcome("t", 8, 0.9)], "accuracy").params == (
        TrialParams("t", 8, 0.01, 0)
    )
    tied = [_outcome("t", 16, 0.8), _outcome("t", 2, 0.8), _outcome("t", 8, 0.8)]
    assert choose_best(tied, "accuracy").params.reduction_factor == 2
    tied_rf = [_outcome("t", 2, 0.8, lr=0.1), _outcome("t", 2, 0.8, lr=0.001)]
    assert choose_best(tied_rf, "accuracy").params.learning_rate == 0.001


def test_resume_without_an_interrupted_sweep_is_refused(config) -> None:
    from adapterfleet.orchestration.sweep import resume_sweep

    with pytest.raises(SweepError, match="cannot resume the sweep .* no sweep was started"):
        resume_sweep(config, progress=lambda line: None)


def test_plan_resumes_only_a_sweep_of_the_same_settings(config, tmp_path: Path) -> None:
    from adapterfleet.registry import default_tracking_uri, ensure_experiment
    from adapterfleet.tuning.plan import META_FILE, experiment_path, place_experiment, plan_sweep

    uri = default_tracking_uri(tmp_path / "mlruns")
    experiment = ensure_experiment(uri, config.name)
    fresh = plan_sweep(config, uri, experiment)
    assert not fresh.restore and fresh.pending == ("fruit", "water")
    assert fresh.sweep_name.startswith(f"tinysweep-{fresh.sweep_hash[:8]}-")
    # an interrupted sweep of these settings (Tune's tuner.pkl and our note beside it)
    path = experiment_path(config)
    path.mkdir(parents=True)
    tune_state(path)
    note = {
        "sweep_name": "tinysweep-old",
        "sweep_hash": fresh.sweep_hash,
        "tasks": ["fruit", "water"],
    }
    (path / META_FILE).write_text(json.dumps(note))
    for resume in (None, True):
        plan = plan_sweep(config, uri, experiment, resume=resume)
        assert plan.restore and plan.sweep_name == "tinysweep-old"
        assert place_experiment(plan) is None and path.is_dir()
    anew = plan_sweep(config, uri, experiment, resume=False)
    assert not anew.restore and anew.sweep_name != "tinysweep-old"
    # other settings: resuming is refused, a plain run starts anew and moves the old one aside
    (path / META_FILE).write_text(json.dumps({**note, "sweep_hash": "0" * 64}))
    with pytest.raises(SweepError, match="settings or tasks changed"):
        plan_sweep(config, uri, experiment, resume=True)
    plan = plan_sweep(config, uri, experiment)
    assert not plan.restore
    moved = path.parent / "previous" / "tinysweep-old"
    assert place_experiment(plan) == f"set aside the earlier sweep tinysweep-old in {moved}"
    assert (moved / "tuner.pkl").is_file() and not path.exists()


def test_a_sweep_set_aside_unfinished_is_brought_back_for_its_settings(
    config, tmp_path: Path
) -> None:
    """Bob's sweep was interrupted; Alice ran the same pipeline name with other settings, which
    set Bob's aside without a word; Bob's `run --resume` was refused ('the adapter settings or
    tasks changed') though his had not, and a plain run trained from epoch 1."""
    from adapterfleet.registry import default_tracking_uri, ensure_experiment
    from adapterfleet.tuning.plan import META_FILE, experiment_path, place_experiment, plan_sweep

    uri = default_tracking_uri(tmp_path / "mlruns")
    experiment = ensure_experiment(uri, config.name)
    digest = plan_sweep(config, uri, experiment).sweep_hash
    path = experiment_path(config)
    sweeps = {"tinysweep-bob": digest, "tinysweep-alice": "1" * 64}
    for name, hashed in sweeps.items():  # Bob's set aside, Alice's in place
        place = path if name.endswith("alice") else path.parent / "previous" / name
        place.mkdir(parents=True)
        tune_state(place)
        note = {"sweep_name": name, "sweep_hash": hashed, "tasks": ["fruit", "water"]}
        (place / META_FILE).write_text(json.dumps(note))
    for resume in (True, None):
        plan = plan_sweep(config, uri, experiment, resume=resume)
        assert plan.restore and plan.sweep_name == "tinysweep-bob", resume
    line = place_experiment(plan)
    alice, bob = (path.parent / "previous" / f"tinysweep-{who}" for who in ("alice", "bob"))
    assert line == (
        f"set aside the earlier sweep tinysweep-alice in {alice}; "
        f"brought back tinysweep-bob from {bob} to resume it"
    )
    assert json.loads((path / META_FILE).read_text())["sweep_name"] == "tinysweep-bob"
    assert (alice / "tuner.pkl").is_file() and not bob.exists()
    assert not plan_sweep(config, uri, experiment, resume=False).restore  # never when told anew


def test_another_pipelines_sweep_set_aside_is_not_brought_back(config, tmp_path: Path) -> None:
    """previous/ is shared by every pipeline of a storage: a new pipeline of the same settings
    brought back another's set-aside sweep and resumed it, its versions registered under the
    new name with their runs in the other's experiment. Its own is still brought back."""
    from adapterfleet.registry import default_tracking_uri, ensure_experiment
    from adapterfleet.tuning.plan import META_FILE, experiment_path, plan_sweep

    uri = default_tracking_uri(tmp_path / "mlruns")
    experiment = ensure_experiment(uri, config.name)
    digest = plan_sweep(config, uri, experiment).sweep_hash
    aside = experiment_path(config).parent / "previous"
    for name, pipeline in (("other-x", "other"), ("tinysweep2-y", None)):
        (aside / name).mkdir(parents=True)
        tune_state(aside / name)
        note = {"sweep_name": name, "sweep_hash": digest, "tasks": ["fruit", "water"]}
        note |= {"pipeline": pipeline} if pipeline else {}  # a note before that key: its name
        (aside / name / META_FILE).write_text(json.dumps(note))
    plan = plan_sweep(config, uri, experiment)
    assert not plan.restore and plan.set_aside_at is None, plan.sweep_name
    (aside / "tinysweep-z").mkdir()
    tune_state(aside / "tinysweep-z")
    note = {"sweep_name": "tinysweep-z", "sweep_hash": digest, "tasks": ["fruit", "water"]}
    (aside / "tinysweep-z" / META_FILE).write_text(json.dumps({**note, "pipeline": "tinysweep"}))
    own = plan_sweep(config, uri, experiment)
    assert own.restore and own.set_aside_at == aside / "tinysweep-z"


def test_a_sweep_stopped_before_tune_saved_its_state_starts_anew(config, tmp_path: Path) -> None:
    """Ctrl-C in the first tenth of a second of a sweep left Tune's tuner.pkl without an
    experiment state: every run after tried to restore it and failed in Tune (`KeyError:
    'task'`, some 200 lines) until the folder was deleted by hand."""
    from adapterfleet.registry import default_tracking_uri, ensure_experiment
    from adapterfleet.tuning.plan import META_FILE, experiment_path, place_experiment, plan_sweep

    uri = default_tracking_uri(tmp_path / "mlruns")
    experiment = ensure_experiment(uri, config.name)
    digest = plan_sweep(config, uri, experiment).sweep_hash
    path = experiment_path(config)
    path.mkdir(parents=True)
    (path / "tuner.pkl").write_bytes(b"")  # no experiment_state-*.json
    note = {"sweep_name": "tinysweep-early", "sweep_hash": digest, "tasks": ["fruit", "water"]}
    (path / META_FILE).write_text(json.dumps(note))
    plan = plan_sweep(config, uri, experiment)
    assert not plan.restore and plan.sweep_name != "tinysweep-early"
    assert place_experiment(plan) is not None and not path.exists()  # set aside, not resumed
    assert not plan_sweep(config, uri, experiment).restore  # nor brought back from previous/


def test_resuming_a_sweep_whose_saved_state_was_deleted_says_so(config, tmp_path: Path) -> None:
    """An interrupted sweep whose folder was deleted (`ray/<name>`, or `ray/previous/*` after
    another config of the pipeline name set it aside): `run --resume` said `no sweep was started
    there`, or `the adapter settings or tasks changed since it started`, neither of them true.
    MLflow still holds its sweep runs, KILLED: the refusal names the sweep and its folder. A
    plain `run` trained its finished trials again without a word; now it says so first."""
    from adapterfleet.orchestration.sweep import _say_planned
    from adapterfleet.registry import default_tracking_uri, ensure_experiment, open_sweep_run
    from adapterfleet.tuning.plan import META_FILE, experiment_path, plan_sweep

    uri = default_tracking_uri(tmp_path / "mlruns")
    experiment = ensure_experiment(uri, config.name)
    digest = plan_sweep(config, uri, experiment).sweep_hash
    bob = f"tinysweep-{digest[:8]}-20260101T000000"
    for task in ("fruit", "water"):  # Ctrl-C ended them
        open_sweep_run(uri, experiment, bob, task).end("KILLED")
    path = experiment_path(config)
    fix = (
        "so its trials cannot be restored; run the pipeline without --resume (`adapterfleet "
        "run CONFIG`) to start afresh (adapters already registered are kept)"
    )
    with pytest.raises(SweepError) as refused:  # its folder deleted
        plan_sweep(config, uri, experiment, resume=True)
    assert (
        str(refused.value)
        == f"cannot resume the sweep {bob}: its saved state ({path}) is gone, {fix}"
    )
    path.mkdir(parents=True)  # Alice's sweep of other settings in place, Bob's set aside, deleted
    tune_state(path)
    note = {"sweep_name": "tinysweep-alice", "sweep_hash": "1" * 64, "tasks": ["fruit", "water"]}
    (path / META_FILE).write_text(json.dumps(note))
    with pytest.raises(SweepError) as refused:
        plan_sweep(config, uri, experiment, resume=True)
    aside = path.parent / "previous" / bob
    assert (
        str(refused.value)
        == f"cannot resume the sweep {bob}: its saved state ({aside}) is gone, {fix}"
    )
    plain = plan_sweep(config, uri, experiment)  # a plain run starts afresh, and says why
    assert not plain.restore and plain.lost == (bob, aside)
    said: list[str] = []
    _say_planned(plain, uri, said.append)
    assert said == [
        f"the interrupted sweep {bob} cannot be resumed: its saved state ({aside}) is gone; its "
        "tasks start in a new sweep, trials it had finished too"
    ]
    assert plan_sweep(config, uri, experiment, resume=False).lost is None  # asked for anew


def test_trials_get_absolute_paths(config, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from adapterfleet.tuning.sweep import worker_config

    monkeypatch.chdir(tmp_path)
    (tmp_path / "local-model").mkdir()
    relative = dataclasses.replace(config, storage=Path("runs"), base_model="local-model")
    absolute = worker_config(relative)
    assert absolute.storage == tmp_path / "runs"
    assert absolute.base_model == str(tmp_path / "local-model")
    assert worker_config(dataclasses.replace(config, base_model="minilm-l6")).base_model == (
        "minilm-l6"
    )


def test_importing_the_layers_starts_nothing() -> None:
    """The CLI and config load no torch, ray or mlflow (`status` answers in under a second)."""
    code = (
        "import sys, adapterfleet.tuning, adapterfleet.orchestration, adapterfleet.training\n"
        "import adapterfleet.config, adapterfleet.registry, adapterfleet.cli.app\n"
        "heavy = [m for m in ('ray', 'mlflow', 'torch') if m in sys.modules]\n"
        "assert not heavy, heavy\n"
        "import adapterfleet.training as t\n"
        "assert all(getattr(t, name) is not None for name in t.__all__)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_checkpoints_tune_deleted_after_its_last_state_are_refilled(tmp_path: Path) -> None:
    """A sweep SIGTERMed between Tune's deleting an old checkpoint and its saving the state
    resumed with the checkpoint still listed: Tune's ERROR `Error handling checkpoint` (a
    FileNotFoundError) on each new one, then the next resume failed the trial for good (`Could
    not recover from checkpoint as it does not exist on storage anymore`). Empty folders stand
    in for the latest deleted ones (those a lagging state can list), nothing else is made."""
    from adapterfleet.tuning.checkpoints import STATE_LAG, refill_deleted_checkpoints

    experiment = tmp_path / "demo"
    short, long, none = (experiment / name for name in ("adapter_trial_0", "adapter_trial_1", "x"))
    for trial, kept in ((short, (2, 3)), (long, (28, 29))):
        for index in kept:
            (trial / f"checkpoint_{index:06d}").mkdir(parents=True)
            (trial / f"checkpoint_{index:06d}" / "trainer_state.json").write_text("{}")
    none.mkdir()
    made = refill_deleted_checkpoints(experiment)
    assert sorted(p.relative_to(experiment).as_posix() for p in made) == [
        *(f"adapter_trial_0/checkpoint_{i:06d}" for i in (0, 1)),
        *(f"adapter_trial_1/checkpoint_{i:06d}" for i in range(28 - STATE_LAG, 28)),
    ]
    assert all(p.is_dir() and not any(p.iterdir()) for p in made)
    assert list(none.iterdir()) == [] and refill_deleted_checkpoints(experiment) == []
    assert refill_deleted_checkpoints(tmp_path / "absent") == []


def test_trials_pending_with_none_running_say_what_they_wait_for(config, ray_local: None) -> None:
    """A team's sweep waited 100 s for CPUs another job held, its log silent after `fusion ...:
    waiting`. After a minute of trials pending with none running, one line says what they ask
    and what the cluster has free; once per stall."""
    import time

    import ray

    from adapterfleet.config.stages import Resources
    from adapterfleet.tuning.progress import Stall, free_resources, resources_asked, stall_line

    stall = Stall(after_s=60.0)
    waiting = ["PENDING", "PENDING", "TERMINATED"]
    assert [stall.due(waiting, t) for t in (0.0, 59.0, 60.0, 61.0)] == [False, False, True, False]
    assert not stall.due(["RUNNING", "PENDING"], 70.0)  # one runs: the others just queue
    assert [stall.due(waiting, t) for t in (80.0, 140.0)] == [False, True]  # a new stall
    assert not Stall(after_s=0.0).due(["TERMINATED", "RUNNING"], 1e9)

    two = dataclasses.replace(config, resources=Resources(cpu=4, gpu=1, workers=2))
    assert resources_asked(two) == "2 workers of cpu 4, gpu 1"
    assert resources_asked(dataclasses.replace(config, resources=Resources(cpu=1))) == "cpu 1"

    @ray.remote(num_cpus=2)
    def hold(seconds: float) -> None:
        time.sleep(seconds)

    assert free_resources() == "2 of 2 CPUs"
    assert free_resources(gpus=True) == "2 of 2 CPUs, 0 of 0 GPUs"  # asked for, none there
    held = hold.remote(30)
    deadline = time.monotonic() + 20
    while free_resources() != "0 of 2 CPUs" and time.monotonic() < deadline:
        time.sleep(0.2)
    line = stall_line(2, "cpu 1", free_resources(), 60.0)
    ray.cancel(held, force=True)
    assert line == (
        "2 trials have waited 1 min 0 s for resources: each asks cpu 1; the cluster has 0 of 2 "
        "CPUs free; they start once it has what one asks (other jobs may hold the rest, or an "
        "autoscaler may still be adding nodes)"
    )


def test_a_restored_trial_of_a_task_registered_since_is_not_run(config, tmp_path: Path) -> None:
    """A restored sweep brings back every unfinished trial, also one of a task that another
    config of the pipeline registered meanwhile. Such a trial had no sweep run here, so it
    reopened another sweep's run of its trial id (the registered version's source), logged
    into it and left it RUNNING. It now ends at once, unrun, and the driver says why."""
    from mlflow import MlflowClient

    from adapterfleet.registry import (
        TAG_TASK,
        default_tracking_uri,
        ensure_experiment,
        open_sweep_run,
        open_trial_run,
    )
    from adapterfleet.tuning.registration import Registrar
    from adapterfleet.tuning.spec import SweepContext
    from adapterfleet.tuning.trial import make_trainable

    uri = default_tracking_uri(tmp_path / "mlruns")
    experiment = ensure_experiment(uri, config.name)
    params = TrialParams("water", 4, 0.01, 0)
    other = open_sweep_run(uri, experiment, "tinysweep-aaaa1111-20260101T000000", "water")
    source = open_trial_run(
        uri, experiment, other.run_id, params.trial_id, tags={TAG_TASK: "water"}
    )
    source.end("FINISHED")
    client = MlflowClient(uri)
    before = client.get_run(source.run_id)
    restored = "tinysweep-bbbb2222-20260102T000000"
    fruit = open_sweep_run(uri, experiment, restored, "fruit").run_id  # water is not pending
    ctx = SweepContext(config, uri, experiment, restored, {"fruit": fruit})
    assert make_trainable(ctx, {"cpu": 1})(params.to_config()) is None
    after = client.get_run(source.run_id)
    assert (after.info.status, after.data.tags) == (before.info.status, before.data.tags)
    trials = client.search_runs([experiment], "tags.`adapterfleet.kind` = 'trial'")
    assert [run.info.run_id for run in trials] == [source.run_id]
    lines: list[str] = []
    registrar = Registrar(uri, config, restored, tmp_path / "trials", {}, lines.append)
    registrar.trial_ended(TrialOutcome(params, "finished", {}), [])
    assert lines == [
        "trial water-rf4-lr0.01-s0: not run, task water has its adapter registered already"
    ]


def test_a_trial_of_several_workers_whose_workers_wait_counts_as_pending(ray_local: None) -> None:
    """Tune starts the driver of a trial of `workers: 2` at once (it reserves no CPU); its
    workers then waited minutes for CPUs other jobs held, without the line one-worker trials
    get after a minute. While a placement group waits, such a trial that has reported nothing
    counts as pending for that line; one that reported an epoch does not."""
    import ray.util

    from adapterfleet.tuning import progress
    from adapterfleet.tuning.progress import waiting_statuses

    @dataclasses.dataclass
    class Seen:  # the two attributes of Tune's Trial that are read
        status: str
        last_result: dict

    trials = [Seen("RUNNING", {}), Seen("RUNNING", {"epoch": 1}), Seen("PENDING", {})]
    progress._placement["at"] = float("-inf")
    assert waiting_statuses(trials, True) == ["RUNNING", "RUNNING", "PENDING"]  # none waits
    group = ray.util.placement_group([{"CPU": 64}])  # more than the cluster has: it waits
    try:
        progress._placement["at"] = float("-inf")
        assert waiting_statuses(trials, True) == ["PENDING", "RUNNING", "PENDING"]
        assert waiting_statuses(trials, False) == ["RUNNING", "RUNNING", "PENDING"]
    finally:
        ray.util.remove_placement_group(group)
        progress._placement["at"] = float("-inf")


def test_the_trial_runs_of_two_sweeps_are_named_apart(config, tmp_path: Path) -> None:
    """Every sweep of a task named its trial runs by the trial id alone: in the runs table two
    sweeps' `fruit-rf4-lr0.01-s0` could not be told apart. A short key of the sweep tells them
    apart; the same sweep (resumed) keeps the name, and the run is found by its tags. The run
    belongs to the sweep's driver (it runs in a Tune worker): that driver ends it on Ctrl-C."""
    from mlflow import MlflowClient

    from adapterfleet.registry import default_tracking_uri, ensure_experiment, open_sweep_run
    from adapterfleet.registry.tags import TAG_DRIVER
    from adapterfleet.tuning.spec import SweepContext
    from adapterfleet.tuning.trial import open_run, trial_config

    uri = default_tracking_uri(tmp_path / "mlruns")
    experiment = ensure_experiment(uri, config.name)
    params = TrialParams("fruit", 4, 0.01, 0)
    names = {}
    for sweep in ("tinysweep-aaaa1111-20260101T000000", "tinysweep-bbbb2222-20260102T000000"):
        parent = open_sweep_run(uri, experiment, sweep, "fruit").run_id
        ctx = SweepContext(config, uri, experiment, sweep, {"fruit": parent}, driver="head-1 42")
        logger = open_run(ctx, params, trial_config(ctx, params))
        assert MlflowClient(uri).get_run(logger.run_id).data.tags[TAG_DRIVER] == "head-1 42"
        logger.end("KILLED")
        again = open_run(ctx, params, trial_config(ctx, params))  # resumed: the same run
        assert again.run_id == logger.run_id
        names[sweep] = MlflowClient(uri).get_run(logger.run_id).info.run_name
    first, second = names.values()
    assert first != second, names
    for name in names.values():
        key = name.removeprefix(f"{params.trial_id}-")
        assert key != name and len(key) <= 8 and key.isalnum(), name


def test_the_epoch_lines_count_only_the_trials_of_the_tasks_this_run_trains(
    config, tmp_path: Path
) -> None:
    """A resumed sweep said `3 tasks, 3 trials`, then `[trials 0 done, 2 running, 2 pending]`:
    the count took in a restored trial of a task registered already, which is not run."""
    from adapterfleet.tuning.registration import Registrar, TaskPlan

    @dataclasses.dataclass
    class Seen:  # the two attributes of Tune's Trial that are read
        status: str
        config: dict

    fruit = [TrialParams("fruit", 4, lr, 0) for lr in (0.01, 0.001)]
    water = TrialParams("water", 4, 0.01, 0)
    plan = TaskPlan("fruit", "t.adapter.fruit", "h", frozenset(p.trial_id for p in fruit))
    lines: list[str] = []
    registrar = Registrar(
        "sqlite:///unused.db", config, "s", tmp_path, {"fruit": plan}, lines.append
    )
    trials = [
        Seen("RUNNING", fruit[0].to_config()),
        Seen("PENDING", fruit[1].to_config()),
        Seen("PENDING", water.to_config()),
    ]
    metric = registrar.metric("fruit")
    result = {"epoch": 1, "train_loss": 0.5, f"best_dev_{metric}": 0.7, "best_epoch": 1}
    registrar.epoch_reported(fruit[0], result, trials)
    assert len(lines) == 1 and lines[0].endswith("[trials 0 done, 1 running, 1 pending]")
