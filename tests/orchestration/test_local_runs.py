"""`adapterfleet train` / `fuse` (`train_task`, `fuse_task`) and their `--out`: a run folder is
always one whole run (an earlier run there is replaced once the new one is saved, and kept when
it fails), and what can be refused from the options and folders is refused before training."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from local_support import FAST

from adapterfleet.config import ConfigError, PipelineConfig
from adapterfleet.errors import UserError
from adapterfleet.orchestration.commands import fusion_training
from adapterfleet.orchestration.local import adapter_training, evaluate_run, fuse_task, train_task
from adapterfleet.training import Callback


class _Fails(Callback):
    def on_epoch_end(self, report) -> None:
        raise RuntimeError("the machine went away")


def _train(config: PipelineConfig, mode: str, out: Path, **options):
    training = adapter_training(config, "fruit", **FAST)
    return train_task(config, "fruit", mode, out, train_config=training, **options)


def test_a_run_into_an_earlier_runs_folder_replaces_it_whole(config, tmp_path) -> None:
    """A head run over a full run's folder used to keep the full run's model/, and evaluate
    then put the new head on that stale encoder."""
    out = tmp_path / "run"
    full = _train(config, "full", out)
    assert (out / "model").is_dir()
    said: list[str] = []
    head = _train(config, "head", out, say=said.append)
    assert head.out_dir == out
    rate = adapter_training(config, "fruit", **FAST).learning_rate
    accuracy = full.dev_metrics["accuracy"]
    earlier = f"--out {out} holds an earlier run (full fruit, learning_rate {rate:g}, "
    assert said[0] == (
        f"{earlier}accuracy {accuracy:.4f}): this run replaces it once it is saved; stop now "
        "(Ctrl-C) to keep it, and give another --out"
    ), said  # it was replaced without a word
    assert sorted(p.name for p in out.iterdir()) == ["head", "run.json"]
    assert json.loads((out / "run.json").read_text())["mode"] == "head"
    assert evaluate_run(config, "fruit", out) == pytest.approx(head.dev_metrics)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]  # no staging folder left


def test_a_run_that_fails_keeps_the_earlier_run(config, tmp_path) -> None:
    out = tmp_path / "run"
    _train(config, "head", out)
    before = {p.name: p.read_bytes() for p in (out / "head").iterdir()}
    with pytest.raises(RuntimeError, match="went away"):
        _train(config, "st-a", out, callbacks=[_Fails()])
    assert {p.name: p.read_bytes() for p in (out / "head").iterdir()} == before
    assert sorted(p.name for p in out.iterdir()) == ["head", "run.json"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]


@pytest.mark.parametrize("kind", ["file", "other files", "current folder"])
def test_an_out_that_is_not_a_run_folder_is_refused_before_training(
    config, tmp_path, monkeypatch, kind
) -> None:
    """`--out afile` ran the whole training and then failed with NotADirectoryError."""
    out = tmp_path / "out"
    if kind == "file":
        out.write_text("kept")
        words = "is a file; give a folder for the run"
    elif kind == "other files":
        out.mkdir()
        (out / "notes.txt").write_text("kept")
        words = r"holds files that are not a run \(notes.txt\)"
    else:
        out.mkdir()
        (out / "run.json").write_text("{}")  # even an earlier run: it is the shell's folder
        monkeypatch.chdir(out)
        out, words = Path("."), "is the current folder or holds it"
    said: list[str] = []

    class Started(Callback):
        def on_train_start(self) -> None:
            said.append("started")

    with pytest.raises(ConfigError, match=f"--out: .*{words}"):
        _train(config, "head", out, callbacks=[Started()])
    assert said == []
    kept = tmp_path / "out"
    assert kept.read_text() == "kept" if kind == "file" else kept.is_dir()


@pytest.mark.parametrize(
    ("task", "adapter_tasks", "message"),
    [
        ("fruit4", ["fruit", "water"], r"--task: MT-A trains the adapters of adapters.tasks "
                                       r"\(fruit, water\) jointly, .* 'fruit4' is not one"),
        ("fruit", ["fruit", "score"], r"--mode: MT-A selects on one metric .* regression task\(s\) "
                                      r"\['score'\] cannot join"),
    ],
)  # fmt: skip
def test_mt_a_is_refused_before_any_task_is_read(config, tmp_path, task, adapter_tasks, message):
    """Both used to fail after tokenising every task (the second after a whole epoch)."""
    import dataclasses

    adapters = dataclasses.replace(config.adapters, tasks=tuple(adapter_tasks))
    changed = dataclasses.replace(config, adapters=adapters)
    training = adapter_training(config, "fruit", **FAST)
    with pytest.raises(ConfigError, match=message):
        train_task(changed, task, "mt-a", tmp_path / "mta", train_config=training)
    assert not (tmp_path / "mta").exists()


def test_options_left_out_train_as_the_pipeline_trains_the_mode(config, root, tmp_path) -> None:
    """`train` without --lr trained ST-A at `adapters.training.learning_rate`, which no trial
    uses (a trial takes its grid's), and Houlsby / MT-A at the adapters' reduction factor: a
    plain `train` did not reproduce the pipeline's run of the same mode."""
    from adapterfleet.config import load_config

    changes = [  # adapters.training keeps its default learning rate, 1e-4 (one outside the
        "adapters.learning_rates=[0.003, 0.01]",  # list given there is refused now)
        "adapters.task_grid={water: {learning_rates: [0.02]}}",
        "baselines={systems: [head, st-a-houlsby], reduction_factor: 2, training: "
        "{learning_rate: 0.005, max_epochs: 1, device: cpu}, system_training: {head: "
        "{learning_rate: 0.007, max_epochs: 1, device: cpu}}}",
    ]
    changed = load_config(root / "pipeline.yaml", changes)
    assert adapter_training(changed, "fruit").learning_rate == 0.003
    assert adapter_training(changed, "water").learning_rate == 0.02
    assert adapter_training(changed, "fruit", learning_rate=0.5).learning_rate == 0.5
    assert adapter_training(changed, "fruit", "head").learning_rate == 0.007
    assert adapter_training(changed, "fruit", "st-a-houlsby").learning_rate == 0.005
    assert adapter_training(config, "fruit", "head").learning_rate == 0.01  # no baselines
    training = adapter_training(changed, "fruit", "st-a-houlsby", batch_size=16)
    run = train_task(changed, "fruit", "st-a-houlsby", tmp_path / "h", train_config=training)
    saved = json.loads((run.out_dir / "adapter" / "adapter_config.json").read_text())
    assert saved["config"]["reduction_factor"] == 2


def test_a_reduction_factor_for_a_mode_without_adapter_is_refused(config, tmp_path) -> None:
    with pytest.raises(ConfigError, match="--reduction-factor: mode head trains no adapter"):
        _train(config, "head", tmp_path / "head", reduction_factor=8)


def test_adapters_a_fusion_cannot_mix_are_refused_from_their_folders(config, tmp_path) -> None:
    st_a = _train(config, "st-a", tmp_path / "st-a").out_dir / "adapter"
    houlsby = _train(config, "st-a-houlsby", tmp_path / "houlsby").out_dir / "adapter"
    training = fusion_training(config, "fruit", **FAST)
    cases = [
        ([st_a, houlsby], tmp_path / "f", f"--adapters: {houlsby} is a houlsby adapter"),
        ([st_a, st_a], tmp_path / "f", "are both adapters named 'fruit'"),
        ([st_a], tmp_path / "st-a", "lies inside --out"),
    ]
    for adapters, out, message in cases:
        with pytest.raises(UserError, match=message):
            fuse_task(config, "fruit", adapters, out, train_config=training)
    assert not (tmp_path / "f").exists() and (tmp_path / "st-a" / "adapter").is_dir()


def test_train_st_a_trains_the_pipelines_architecture_and_houlsby_the_grids_rate(
    config, tmp_path
) -> None:
    """`train --mode st-a` trained a Pfeiffer adapter where `run` trains the config's Houlsby
    ones, and `st-a-houlsby` outside the baselines took the adapters' default learning rate of
    1e-4 (a user's stayed at chance where the grid's 0.01 learnt)."""
    from dataclasses import replace

    houlsby = replace(
        config,
        adapters=replace(config.adapters, architecture="houlsby", learning_rates=(0.003,)),
    )
    assert adapter_training(houlsby, "fruit", "st-a-houlsby").learning_rate == 0.003
    assert adapter_training(houlsby, "fruit", "head").learning_rate == FAST["learning_rate"]
    run = train_task(houlsby, "fruit", "st-a", tmp_path / "run",
                     train_config=adapter_training(houlsby, "fruit", max_epochs=1))  # fmt: skip
    assert json.loads((run.out_dir / "run.json").read_text())["mode"] == "st-a-houlsby"
    adapter = json.loads((run.out_dir / "adapter" / "adapter_config.json").read_text())
    assert adapter["config"]["architecture"] == "houlsby", adapter


def test_a_run_no_better_than_learning_nothing_is_warned_as_run_warns(config) -> None:
    """`train` printed an accuracy under the majority class without a word; `run` says it."""
    from adapterfleet.data.baseline import dev_chance
    from adapterfleet.orchestration.local import prepare_task, say_unlearned

    fruit = prepare_task(config, "fruit")
    chance = dev_chance(fruit)
    assert chance is not None
    said: list[str] = []
    say_unlearned({"accuracy": 0.0}, fruit, "accuracy", said.append)
    assert said == [
        f"warning: fruit dev accuracy 0.0000{chance.note('accuracy', 0.0)}: it did not learn "
        "the task"
    ]
    said.clear()
    say_unlearned({"accuracy": 1.0, "f1": 0.0}, fruit, "accuracy", said.append)
    assert said == []  # learned: nothing to say
