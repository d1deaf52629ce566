"""`pipeline_status` on a real SQLite MLflow store with 400+ trial runs."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest
from mlflow import MlflowClient
from mlflow.entities import Metric

from adapterfleet.config import PipelineConfig, load_config
from adapterfleet.registry import (
    TAG_PARENT_RUN,
    TAG_SWEEP,
    TAG_TASK,
    TAG_TRIAL_ID,
    RegistryError,
    adapter_model_name,
    default_tracking_uri,
    ensure_experiment,
    fusion_model_name,
    register_version,
    set_alias,
)
from adapterfleet.registry.heartbeat import HEARTBEAT_ENV, heartbeat
from adapterfleet.registry.interrupted import clear_interrupted, mark_interrupted
from adapterfleet.registry.tags import (
    TAG_CONFIG_HASH,
    TAG_HEARTBEAT,
    TAG_KIND,
    TAG_LINEAGE,
    TAG_SEED,
    TAG_STOPPED_EARLY,
    TAG_SYSTEM,
)
from adapterfleet.results.status import StatusPlan, pipeline_status, status_by_name

TASKS = ("a", "b", "c", "d")
GRID = "adapters: {reduction_factors: [2, 16], learning_rates: [0.1, 0.2, 0.3, 0.4, 0.5], "
GRID += "seeds: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]}\n"  # 100 trials per task


def write_config(folder: Path, fusion: str) -> PipelineConfig:
    (folder / "t.tsv").write_text("sentence\tlabel\nx y\t0\nz w\t1\n")
    lines = ["name: statusdemo", f"storage: {folder / 'store'}", "data_root: .", "tasks:"]
    spec = '{train: t.tsv, dev: t.tsv, text_fields: [sentence], label_names: ["0", "1"]}'
    lines += [f"  {task}: {spec}" for task in TASKS]
    (folder / "pipe.yaml").write_text("\n".join(lines) + "\n" + GRID + fusion)
    return load_config(folder / "pipe.yaml")


class Store:
    """Creates runs straight through `MlflowClient`, as the sweep would leave them."""

    def __init__(self, config: PipelineConfig, folder: Path) -> None:
        self.config = config
        self.uri = default_tracking_uri(folder / "store")
        self.experiment = ensure_experiment(self.uri, config.name)
        self.client = MlflowClient(self.uri)
        self.folder = folder
        self.trials = 0

    def sweep(self, task: str, name: str) -> str:
        tags = {TAG_KIND: "sweep", TAG_SWEEP: name, TAG_TASK: task}
        return self.client.create_run(self.experiment, tags=tags, run_name=name).info.run_id

    def trial(self, parent: str, task: str, trial_id: str, status: str, **metrics: float) -> str:
        tags = {TAG_KIND: "trial", TAG_TRIAL_ID: trial_id, TAG_TASK: task, TAG_PARENT_RUN: parent}
        run_id = self.client.create_run(self.experiment, tags=tags, run_name=trial_id).info.run_id
        if metrics:
            stamp = int(time.time() * 1000)
            items = [Metric(k, v, stamp, 0) for k, v in metrics.items()]
            self.client.log_batch(run_id, metrics=items)
        if status != "RUNNING":
            self.client.set_terminated(run_id, status)
        self.trials += 1
        return run_id

    def register(
        self, kind: str, task: str, alias: str | None = "best", tags: dict | None = None
    ) -> int:
        run_id = self.client.create_run(self.experiment, tags={TAG_KIND: kind}).info.run_id
        weights = self.folder / f"{kind}-{task}.safetensors"
        weights.write_bytes(task.encode())
        name = (adapter_model_name if kind == "adapter" else fusion_model_name)("statusdemo", task)
        info = register_version(self.uri, name, run_id, kind, weights, tags=tags, alias=alias)
        return info.version


FUSIONS = "fusion: {targets: {a: all, b: [b, c], c: [c, d], d: [b, c]}}\n"


@pytest.fixture(scope="module")
def populated_once(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    """The store of 400+ runs (~10 s of SQLite writes), made once: its folder and trial count."""
    folder = tmp_path_factory.mktemp("populated")
    store = Store(write_config(folder, FUSIONS), folder)
    populate(store)
    return folder / "store", store.trials


@pytest.fixture
def populated(populated_once: tuple[Path, int], tmp_path: Path) -> tuple[PipelineConfig, Store]:
    """A copy of that store of this test's own (the tests mark and end runs in it)."""
    folder, trials = populated_once
    shutil.copytree(folder, tmp_path / "store")
    store = Store(write_config(tmp_path, FUSIONS), tmp_path)
    store.trials = trials
    return store.config, store


def populate(store: Store) -> None:
    """What sweeps of four tasks leave: trials of every state, versions, a fusion running."""
    old = store.sweep("a", "sweep-old")  # an earlier sweep of a: its trials do not count
    for i in range(5):
        store.trial(old, "a", f"a-{i}", "FINISHED", best_dev_accuracy=0.9999)
    sweeps = {task: store.sweep(task, "sweep-new") for task in TASKS}
    # a: 60 finished (one of them run twice), 20 running, 15 failed, 5 killed
    for i in range(100):
        status = "FINISHED" if i < 60 else "RUNNING" if i < 80 else "FAILED" if i < 95 else "KILLED"
        metric = "dev_accuracy" if status == "RUNNING" else "best_dev_accuracy"
        value = {79: 0.97, 90: 0.999}.get(i, 0.5 + i / 1000)  # 79 running, 90 failed
        if i == 3:  # an earlier failed attempt of the same trial
            store.trial(sweeps["a"], "a", "a-3", "FAILED")
        run_id = store.trial(sweeps["a"], "a", f"a-{i}", status, **{metric: value})
        if i == 79:  # its best epoch so far came before its latest one
            store.client.log_metric(run_id, "dev_accuracy", 0.985, step=1)
            store.client.log_metric(run_id, "dev_accuracy", 0.97, step=2)
    for i in range(30):  # b: 30 of 100 finished, 5 stopped by ASHA, the rest not started
        store.trial(sweeps["b"], "b", f"b-{i}", "FINISHED", best_dev_accuracy=0.6 + i / 100)
    for i in range(30, 35):  # as a trial ASHA stops ends its run: higher dev, no adapter
        run_id = store.trial(sweeps["b"], "b", f"b-{i}", "FINISHED", dev_accuracy=0.99)
        store.client.set_tag(run_id, TAG_STOPPED_EARLY, "1")
    for i in range(100):  # c: all finished
        store.trial(sweeps["c"], "c", f"c-{i}", "FINISHED", best_dev_accuracy=0.7)
    for i in range(164):  # d: 100 running, without metrics yet, 64 of them twice
        store.trial(sweeps["d"], "d", f"d-{i % 100}", "RUNNING")
    store.register("adapter", "b")
    store.register("adapter", "c")
    store.register("adapter", "c")  # v2 takes the alias
    store.register("adapter", "d", alias=None)
    # as the fusion stage tags it: the metric and its dev value
    store.register("fusion", "b", tags={"metric": "accuracy", "dev_accuracy": 0.78666666})
    # as open_fusion_run makes it: a kind tag and a trial id (the fusion id)
    fusion_run = {TAG_KIND: "fusion", TAG_TASK: "d", TAG_TRIAL_ID: "fusion-d-0123456789ab"}
    store.client.create_run(store.experiment, tags=fusion_run)


def test_status_counts_with_400_trials(populated: tuple[PipelineConfig, Store]) -> None:
    config, store = populated
    assert store.trials >= 400
    status = pipeline_status(config, config.tracking_uri)
    print(f"\npipeline_status over {store.trials} trial runs: {status.elapsed_s:.3f}s")
    tasks = {t.task: t for t in status.tasks}
    a, b, c, d = (tasks[name] for name in TASKS)
    # KILLED is how a stopped run ends (Ctrl-C, SIGTERM): the next run goes on with it
    assert (a.total, a.done, a.running, a.failed, a.pending) == (100, 60, 20, 15, 5)
    assert a.best == pytest.approx(0.985) and a.best_trial == "a-79"  # its best epoch so far
    assert (b.done, b.stopped, b.running, b.failed, b.pending) == (30, 5, 0, 0, 65)
    assert b.best == pytest.approx(0.89) and b.adapter_version == 1 and b.registered
    assert (c.done, c.pending, c.adapter_version, c.adapter_aliases) == (100, 0, 2, ("best",))
    assert (d.done, d.running, d.pending, d.best) == (0, 100, 0, None)
    assert d.adapter_version == 1 and not d.registered
    assert a.adapter_version is None
    fusions = {f.target: f for f in status.fusions}
    assert fusions["a"].state == "waiting for a, d" and fusions["a"].missing == ("a", "d")
    assert fusions["b"].state == "v1 @best" and fusions["b"].version == 1
    assert fusions["b"].best == pytest.approx(0.78666666) and fusions["a"].best is None
    assert fusions["c"].state == "waiting for d"
    assert fusions["d"].state == "training"
    text = status.render()
    print(text)
    lines = text.splitlines()
    assert lines[0].startswith("pipeline statusdemo")
    row_a = next(line for line in lines if line.startswith("a "))
    assert row_a.split()[1:7] == ["60", "0", "20", "15", "5", "0.9850"]
    assert lines[1].split()[:6] == ["TASK", "DONE", "STOP", "RUN", "FAIL", "PEND"]
    row_b = next(line for line in lines if line.startswith("b "))
    assert row_b.split()[1:7] == ["30", "5", "0", "0", "65", "0.8900"]
    row_c = next(line for line in lines if line.startswith("c "))
    assert row_c.endswith("v2 @best")
    assert any(line.split()[:2] == ["c", "c,d"] and "waiting for d" in line for line in lines)
    fusion_header = next(line for line in lines if line.startswith("FUSION"))
    assert fusion_header.split() == ["FUSION", "ADAPTERS", "STATE", "BEST"]
    row_fusion_b = next(line for line in lines if line.split()[:2] == ["b", "b,c"])
    assert row_fusion_b.split()[2:] == ["v1", "@best", "0.7867", "accuracy"]


def _one_task_store(tmp_path: Path) -> Store:
    """A pipeline of one task `a` with one trial, its store empty."""
    (tmp_path / "t.tsv").write_text("sentence\tlabel\nx y\t0\nz w\t1\n")
    spec = '{train: t.tsv, dev: t.tsv, text_fields: [sentence], label_names: ["0", "1"]}'
    (tmp_path / "pipe.yaml").write_text(
        f"name: statusdemo\nstorage: {tmp_path / 'store'}\ndata_root: .\ntasks:\n  a: {spec}\n"
        "adapters: {reduction_factors: [16], learning_rates: [0.1], seeds: [0]}\n"
    )
    store = Store(load_config(tmp_path / "pipe.yaml"), tmp_path)
    return store


def test_best_is_the_registered_versions_own_once_its_sweep_is_over(tmp_path: Path) -> None:
    """A tester edited a data file (a second sweep registered v2 at 0.6750 on it), put the file
    back (`best` moved back to v1, 0.6333): status showed 0.6750 beside `v1 @best`, the newest
    sweep's figure, from a model trained on other data. Once the sweep is over, BEST is the
    `best` version's own; while one runs, its best so far."""
    store = _one_task_store(tmp_path)
    tags = {"metric": "accuracy", TAG_TRIAL_ID: "a-1"}
    store.trial(store.sweep("a", "sweep-1"), "a", "a-1", "FINISHED", best_dev_accuracy=0.63333)
    first = store.register("adapter", "a", tags={**tags, "metric_value": "0.6333"})
    store.trial(store.sweep("a", "sweep-2"), "a", "a-1", "FINISHED", best_dev_accuracy=0.675)
    store.register("adapter", "a", tags={**tags, "metric_value": "0.675"})
    name = adapter_model_name("statusdemo", "a")
    set_alias(store.uri, name, "best", first)  # the files put back: the sweep reused v1

    def best() -> tuple[float | None, int | None]:
        (row,) = pipeline_status(store.config, store.uri).tasks
        return row.best, row.adapter_version

    assert best() == (pytest.approx(0.6333), 1)  # it was 0.6750
    store.trial(store.sweep("a", "sweep-3"), "a", "a-1", "RUNNING", dev_accuracy=0.55)
    assert best() == (pytest.approx(0.55), 1)  # a sweep that runs: its best so far


def test_status_of_a_config_counts_the_sweep_of_its_settings(tmp_path: Path) -> None:
    """`status -c` counted the newest sweep of any settings: after a sweep of other settings
    whose trials diverged, a plain run (nothing to train: v1 @best again) showed this config's
    task FAIL 1, DONE 0; it counts the newest sweep of the config's own settings."""
    from adapterfleet.tuning.spec import task_config_hash

    store = _one_task_store(tmp_path)
    ours = store.sweep("a", "sweep-1")
    store.client.set_tag(ours, TAG_CONFIG_HASH, task_config_hash(store.config, "a"))
    store.trial(ours, "a", "a-1", "FINISHED", best_dev_accuracy=0.75)
    store.register("adapter", "a", tags={"metric": "accuracy", TAG_TRIAL_ID: "a-1"})
    other = store.sweep("a", "sweep-2")  # newer, of other settings: its trial failed
    store.client.set_tag(other, TAG_CONFIG_HASH, "0" * 64)
    store.trial(other, "a", "a-1", "FAILED")
    result = subprocess.run(
        [sys.executable, "-m", "adapterfleet.cli.app", "status", "-c", str(tmp_path / "pipe.yaml")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    row = next(line for line in result.stdout.splitlines() if line.startswith("a "))
    assert row.split()[:6] == ["a", "1", "0", "0", "0", "0"], result.stdout  # DONE 1, FAIL 0
    assert pipeline_status(store.config, store.uri).tasks[0].failed == 1  # no hashes: newest


def test_status_not_started_and_missing_store(tmp_path: Path) -> None:
    config = write_config(tmp_path, "fusion: {targets: {a: [b, c]}}\n")
    db = tmp_path / "store" / "mlflow.db"
    empty = pipeline_status(config, config.tracking_uri)
    assert not empty.experiment_found and not db.exists()  # reading does not create the store
    assert [(t.task, t.done, t.pending) for t in empty.tasks][:2] == [("a", 0, 100), ("b", 0, 100)]
    assert empty.fusions[0].state == "waiting for b, c"
    assert "no runs yet" in empty.render()
    store = Store(config, tmp_path)
    store.register("adapter", "b")
    store.register("adapter", "c")
    ready = pipeline_status(config, config.tracking_uri)
    assert ready.experiment_found and ready.fusions[0].state == "not started"
    failed = store.client.create_run(store.experiment, tags={TAG_KIND: "fusion", TAG_TASK: "a"})
    store.client.set_terminated(failed.info.run_id, "FAILED")
    assert pipeline_status(config, config.tracking_uri).fusions[0].state.startswith("failed (run ")
    # Ctrl-C during the fusion ends its run KILLED (`ended_by`): it said "failed" too
    stopped = store.client.create_run(store.experiment, tags={TAG_KIND: "fusion", TAG_TASK: "a"})
    store.client.set_terminated(stopped.info.run_id, "KILLED")
    assert pipeline_status(config, config.tracking_uri).fusions[0].state == "interrupted"
    # another name on this store (a mistyped -o name, or another pipeline's server): its
    # pipelines are named, where "no runs yet (experiment not found)" read as a fresh start
    other = replace(config, name="statusdemo5")
    assert pipeline_status(other, config.tracking_uri).render().splitlines()[1] == (
        "no runs yet (no experiment 'statusdemo5' here; pipelines here: statusdemo)"
    )


def test_status_by_name_matches_the_config_view(
    populated: tuple[PipelineConfig, Store], tmp_path: Path
) -> None:
    config, store = populated
    ensure_experiment(store.uri, config.name, tags=StatusPlan.from_config(config).to_tags())
    by_name = status_by_name(config.name, store.uri)
    by_config = pipeline_status(config, config.tracking_uri)
    assert by_name.tasks == by_config.tasks and by_name.fusions == by_config.fusions
    assert by_name.render() == by_config.render()

    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "adapterfleet.cli.app",
            "status",
            config.name,
            "--tracking-uri",
            store.uri,
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == by_config.render()


def test_status_by_name_without_the_plan_tag_lists_the_swept_tasks(
    populated: tuple[PipelineConfig, Store],
) -> None:
    config, store = populated  # the fixture's experiment carries no plan tag
    status = status_by_name(config.name, store.uri)
    assert [t.task for t in status.tasks] == list(TASKS)  # from the sweep runs, oldest first
    assert {t.task: t.done for t in status.tasks} == {"a": 60, "b": 30, "c": 100, "d": 0}
    assert status.fusions == ()


def test_status_by_unknown_name_says_so_and_creates_nothing(tmp_path: Path) -> None:
    uri = default_tracking_uri(tmp_path / "nowhere")
    with pytest.raises(RegistryError, match="no pipeline 'ghost' in .*check the name"):
        status_by_name("ghost", uri)
    assert not (tmp_path / "nowhere").exists()


def test_status_shows_the_baselines_per_system_and_task(tmp_path: Path) -> None:
    baselines = (
        "fusion: {targets: {a: all}}\n"
        "baselines: {systems: [head, mt-a], tasks: [a], seeds: [0, 1, 2]}\n"
    )
    config = write_config(tmp_path, baselines)
    store = Store(config, tmp_path)

    def baseline(system: str, task: str, seed: int, status: str, kind: str = "baseline", **m):
        tags = {TAG_KIND: kind, TAG_SYSTEM: system, TAG_TASK: task, TAG_SEED: str(seed)}
        tags[TAG_TRIAL_ID] = f"{system}-{task}-s{seed}"
        run_id = store.client.create_run(store.experiment, tags=tags).info.run_id
        stamp = int(time.time() * 1000)
        store.client.log_batch(run_id, metrics=[Metric(k, v, stamp, 0) for k, v in m.items()])
        if status != "RUNNING":
            store.client.set_terminated(run_id, status)

    baseline("head", "a", 0, "FAILED")  # retried: the newer run of seed 0 counts
    baseline("head", "a", 0, "FINISHED", best_dev_accuracy=0.6)
    baseline("head", "a", 1, "FINISHED", best_dev_accuracy=0.8)
    baseline("head", "a", 2, "RUNNING", dev_accuracy=0.99)
    baseline("mt-a", "all", 0, "FINISHED", kind="mt-a")
    baseline("mt-a", "b", 0, "FINISHED", best_dev_accuracy=0.7)  # MT-A's per-task result
    baseline("mt-a", "all", 1, "RUNNING", kind="mt-a")  # its seed 1 trains every task
    rows = {(b.system, b.task): b for b in pipeline_status(config, config.tracking_uri).baselines}
    assert list(rows) == [("head", "a")] + [("mt-a", t) for t in TASKS]
    head = rows[("head", "a")]
    assert (head.total, head.done, head.running, head.failed, head.pending) == (3, 2, 1, 0, 0)
    assert head.mean == pytest.approx(0.7)
    mt_b, mt_c = rows[("mt-a", "b")], rows[("mt-a", "c")]
    assert (mt_b.done, mt_b.running, mt_b.pending, mt_b.mean) == (1, 1, 1, pytest.approx(0.7))
    assert (mt_c.done, mt_c.running, mt_c.pending, mt_c.mean) == (0, 1, 2, None)
    lines = pipeline_status(config, config.tracking_uri).render().splitlines()
    assert lines[lines.index(next(x for x in lines if x.startswith("BASELINE"))) + 1].split() == [
        "head",
        "a",
        "2",
        "1",
        "0",
        "0",
        "0.7000",
        "accuracy",
    ]
    ensure_experiment(store.uri, config.name, tags=StatusPlan.from_config(config).to_tags())
    assert (
        status_by_name(config.name, store.uri).baselines
        == pipeline_status(config, config.tracking_uri).baselines
    )


@pytest.mark.parametrize("ended", ["KILLED", "RUNNING"])
def test_runs_ctrl_c_stopped_are_interrupted_until_the_next_run(
    populated: tuple[PipelineConfig, Store], ended: str
) -> None:
    """Ctrl-C ends the runs its driver left open KILLED (they stay RUNNING where the store did
    not take that in time; the next run reopens them either way); with the mark it leaves on the
    experiment, `status` counts them pending, not failed, and says so in one line. KILLED used
    to count as failed: a KILLED trial is one that was stopped (the fixture's 5 of task a too)."""
    config, store = populated
    for run in store.client.search_runs([store.experiment], "tags.`adapterfleet.kind` = 'fusion'"):
        if TAG_TASK not in run.data.tags:  # the run the fixture registered fusion b from
            store.client.set_terminated(run.info.run_id, "FINISHED")
    open_runs = "attributes.status = 'RUNNING'"
    running = store.client.search_runs([store.experiment], open_runs, max_results=1000)
    assert mark_interrupted(store.uri, config.name)
    left = store.client.search_runs([store.experiment], open_runs, max_results=1000)
    assert len(left) == len(running)  # the fixture's runs belong to no driver: left alone
    for run in running if ended == "KILLED" else []:  # as the driver ends its own
        store.client.set_terminated(run.info.run_id, "KILLED")
    status = pipeline_status(config, config.tracking_uri)
    tasks = {t.task: t for t in status.tasks}
    assert (tasks["a"].running, tasks["a"].pending, tasks["a"].failed) == (0, 25, 15)
    assert (tasks["d"].running, tasks["d"].pending) == (0, 100)
    assert {f.target: f.state for f in status.fusions}["d"] == "interrupted"
    line = status.render().splitlines()[1]
    assert re.fullmatch(
        r"interrupted \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC: 125 trials, 1 fusion stopped mid-way "
        r"\(counted as pending\); run the same command again to continue",
        line,
    ), line
    assert status_by_name(config.name, store.uri).interrupted == status.interrupted

    clear_interrupted(store.uri, store.experiment)  # what the next run does first
    again = pipeline_status(config, config.tracking_uri)
    assert not again.interrupted and not again.render().splitlines()[1].startswith("interrupted")
    a = {t.task: t for t in again.tasks}["a"]  # KILLED until the run reopens them: not failed
    assert (a.running, a.failed) == ((0, 15) if ended == "KILLED" else (20, 15))


def test_runs_a_silent_driver_left_running_are_pending(
    populated: tuple[PipelineConfig, Store], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A driver killed at once (SIGKILL, a lost head node) leaves no mark, only RUNNING runs
    and a heartbeat that stops: while it beats they are running; three intervals after its last
    beat they are pending, and one line says since when."""
    config, store = populated
    monkeypatch.setenv(HEARTBEAT_ENV, "0.5")
    with heartbeat(store.uri, store.experiment):
        time.sleep(2.0)  # beats go on past three of its intervals
        alive = pipeline_status(config, config.tracking_uri)
        assert {t.task: t.running for t in alive.tasks}["a"] == 20 and not alive.interrupted
    tags = store.client.get_experiment(store.experiment).tags
    stamp, interval = tags[TAG_HEARTBEAT].split()[:2]
    assert float(interval) == 0.5 and time.time() - int(stamp) / 1000 < 1.0  # the last beat
    time.sleep(1.6)
    status = pipeline_status(config, config.tracking_uri)
    tasks = {t.task: t for t in status.tasks}
    assert (tasks["a"].running, tasks["a"].pending) == (0, 25)  # and its 5 KILLED: stopped
    assert {f.target: f.state for f in status.fusions}["d"] == "interrupted"
    line = status.render().splitlines()[1]
    assert re.fullmatch(
        r"no heartbeat from the driver since \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC \(killed, or "
        r"its node was lost\): 120 trials, 2 fusions stopped mid-way \(counted as pending\); run "
        r"the same command again to continue",
        line,
    ), line

    with heartbeat(store.uri, store.experiment):  # the next run beats again
        assert not pipeline_status(config, config.tracking_uri).interrupted


def test_a_heartbeat_interval_that_is_not_seconds_is_refused(
    populated: tuple[PipelineConfig, Store], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, store = populated
    for text in ("soon", "0", "-5", "inf"):
        monkeypatch.setenv(HEARTBEAT_ENV, text)
        refused = pytest.raises(RegistryError, match=f"{HEARTBEAT_ENV}='{text}': expected the")
        with refused, heartbeat(store.uri, store.experiment):
            pass
    assert TAG_HEARTBEAT not in store.client.get_experiment(store.experiment).tags


def test_a_beat_the_store_refuses_does_not_stop_the_work(tmp_path: Path) -> None:
    """The stamp is a courtesy to `status`: a store that refuses it (here: no experiment of
    that id) stops nothing."""
    config = write_config(tmp_path, "")
    uri = config.tracking_uri
    ensure_experiment(uri, config.name)
    worked = False
    with heartbeat(uri, "987654"):
        worked = True
    assert worked


def test_a_mark_is_not_written_where_there_is_no_store(tmp_path: Path) -> None:
    config = write_config(tmp_path, "")
    assert not mark_interrupted(config.tracking_uri, config.name)
    assert not (tmp_path / "store").exists()


def test_a_fusion_whose_adapters_best_moved_on_says_so(tmp_path: Path) -> None:
    """A sweep of other settings registered better adapters since the fusion was trained: its
    row read as done, though the next run trains a fusion over the new @best versions."""
    config = write_config(tmp_path, "fusion: {targets: {a: [b, c]}}\n")
    store = Store(config, tmp_path)
    store.register("adapter", "b")
    store.register("adapter", "c")
    fused = {"adapter.b": "v1", "adapter.c": "v1", TAG_LINEAGE: "b:v1,c:v1"}
    store.register("fusion", "a", tags={"metric": "accuracy", "dev_accuracy": 0.7, **fused})
    assert pipeline_status(config, config.tracking_uri).fusions[0].note == ""
    store.register("adapter", "b")  # v2 @best
    (row,) = pipeline_status(config, config.tracking_uri).fusions
    assert row.note == (
        "fusion a v1 @best fuses adapters whose @best has moved on (b v1 → v2): the next run "
        "trains a fusion over the new ones"
    )


def test_a_fusion_whose_adapter_failed_is_blocked_not_waiting(tmp_path: Path) -> None:
    """After a sweep ended with a task's trials failed (the command exited), `status` said
    the fusion was `waiting for` that task, which a monitoring script read as in progress."""
    config = write_config(tmp_path, "fusion: {targets: {a: [b, c]}}\n")
    store = Store(config, tmp_path)
    sweep = store.sweep("b", "statusdemo-00000000-20260101T000000")
    store.client.set_tag(sweep, TAG_CONFIG_HASH, "ours")
    for i in range(100):
        store.trial(sweep, "b", f"b-{i}", "FAILED" if i == 0 else "FINISHED")
    store.register("adapter", "c")
    hashes = {"b": ("ours",)}  # the config's settings hashes, as `status -c` passes them

    def fusion_state(**hashes_of: tuple[str, ...]) -> str:
        (fusion,) = pipeline_status(config, config.tracking_uri, None, hashes_of).fusions
        return fusion.state

    assert fusion_state(**hashes) == "blocked: b failed"
    # another config's sweep failed (it was said blocked too): this config's has not run yet
    assert fusion_state(b=("theirs",)) == "waiting for b"
    again = store.sweep("b", "statusdemo-00000000-20260102T000000")  # a new sweep: it may come
    store.client.set_tag(again, TAG_CONFIG_HASH, "ours")
    store.trial(again, "b", "b-0", "RUNNING")
    assert fusion_state(**hashes) == "waiting for b"
