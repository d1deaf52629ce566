"""The job lifecycle on a tiny model: per-epoch effects in order (checkpoint, sink, hook, prune),
a resume after a crash re-logs exactly the epochs that never reached the sink, nothing twice;
and the job folder's checkpoints. The sink is a list-backed `EpochSink`."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import pytest

from adapterfleet.training import (
    EpochRecorder,
    EpochReport,
    EpochSink,
    JobWorkdir,
    TrainConfig,
    checkpoint_history,
    end_quietly,
    ended_by,
    fit,
    log_best,
    resume_job,
)

CONFIG = TrainConfig(learning_rate=0.02, max_epochs=4, patience=10, seed=3, device="cpu")


class ListSink:
    """An `EpochSink` that keeps what is logged in a list. `fail_at`: logging that step raises
    once (the job dies after the checkpoint, before its metrics reached the sink)."""

    run_id = "list-run"

    def __init__(self, fail_at: int | None = None) -> None:
        self.logged: list[tuple[int | None, dict[str, float]]] = []
        self.tags: list[dict[str, str]] = []
        self.ended: list[str] = []
        self.fail_at = fail_at
        self.on_log = lambda step: None

    def log_metrics(self, metrics: Mapping[str, float], step: int | None = None) -> None:
        if step is not None and step == self.fail_at:
            self.fail_at = None
            raise ConnectionError("the tracking server went away")
        self.on_log(step)
        self.logged.append((step, dict(metrics)))

    def logged_steps(self, key: str) -> set[int]:
        return {step for step, metrics in self.logged if key in metrics and step is not None}

    def set_tags(self, tags: Mapping[str, str]) -> None:
        self.tags.append(dict(tags))

    def end(self, status: str) -> None:
        self.ended.append(status)

    def steps(self, key: str = "train_loss") -> list[int | None]:
        return [step for step, metrics in self.logged if key in metrics]


def _on_disk(work: JobWorkdir) -> list[str]:
    folder = work.root / "checkpoints"
    return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []


def _fit(model, task, callbacks, resume_from: Path | None = None):
    return fit(
        model,
        model.trainable(),
        task["train"],
        task["dev"],
        CONFIG,
        callbacks=callbacks,
        resume_from=resume_from,
    )


def test_list_sink_is_an_epoch_sink() -> None:
    assert isinstance(ListSink(), EpochSink)
    assert not isinstance(object(), EpochSink)


def test_each_epoch_checkpoints_then_logs_then_calls_the_hook_then_prunes(
    make_model, task, tmp_path: Path
) -> None:
    work, sink, effects = JobWorkdir(tmp_path / "job"), ListSink(), []
    sink.on_log = lambda step: effects.append(("log", step, _on_disk(work)))

    def hook(report: EpochReport, metrics: dict[str, float], folder: Path) -> None:
        assert sink.logged[-1] == (report.epoch, metrics)  # the sink has the epoch already
        assert folder == work.checkpoint_dir(report.epoch)
        effects.append(("hook", report.epoch, _on_disk(work)))

    model = make_model()
    result = _fit(model, task, [EpochRecorder(work, sink, hook)])
    assert result.epochs_run == 4
    assert effects == [
        ("log", 1, ["epoch-0001"]),
        ("hook", 1, ["epoch-0001"]),
        ("log", 2, ["epoch-0001", "epoch-0002"]),  # the older one goes only after the hook
        ("hook", 2, ["epoch-0001", "epoch-0002"]),
        ("log", 3, ["epoch-0002", "epoch-0003"]),
        ("hook", 3, ["epoch-0002", "epoch-0003"]),
        ("log", 4, ["epoch-0003", "epoch-0004"]),
        ("hook", 4, ["epoch-0003", "epoch-0004"]),
    ]
    assert _on_disk(work) == ["epoch-0004"]
    first = sink.logged[0][1]
    assert set(first) == {"train_loss", "learning_rate", "dev_accuracy"}
    assert first["train_loss"] == result.history[0]["train_loss"]


def test_a_job_dying_before_its_metrics_resumes_and_logs_each_epoch_once(
    make_model, task, tmp_path: Path
) -> None:
    undisturbed = ListSink()
    _fit(make_model(), task, [EpochRecorder(JobWorkdir(tmp_path / "once"), undisturbed)])

    work, sink = JobWorkdir(tmp_path / "job"), ListSink(fail_at=3)
    with pytest.raises(ConnectionError):
        _fit(make_model(), task, [EpochRecorder(work, sink)])
    assert sink.steps() == [1, 2]  # epoch 3 is checkpointed, never logged
    assert _on_disk(work) == ["epoch-0002", "epoch-0003"]

    start = resume_job(work, sink)
    assert start == (3, work.checkpoint_dir(3))
    assert sink.steps() == [1, 2, 3]  # exactly the missing epoch
    assert resume_job(work, sink) == start and sink.steps() == [1, 2, 3]  # nothing twice

    result = _fit(make_model(), task, [EpochRecorder(work, sink)], resume_from=start[1])
    assert result.epochs_run == 4
    assert sink.steps() == [1, 2, 3, 4]
    # the re-logged epoch holds what the loop logs live, with the same values
    assert [step for step, _ in sink.logged] == [step for step, _ in undisturbed.logged]
    for (_, got), (_, want) in zip(sink.logged, undisturbed.logged, strict=True):
        assert got == pytest.approx(want, rel=1e-6, abs=1e-7)


def test_resume_adopts_an_offered_checkpoint_only_when_it_is_newer(
    make_model, task, tmp_path: Path
) -> None:
    elsewhere = JobWorkdir(tmp_path / "tune-copy")
    _fit(make_model(), task, [EpochRecorder(elsewhere, ListSink())])
    offered = elsewhere.checkpoint_dir(4)

    work, sink = JobWorkdir(tmp_path / "job"), ListSink()
    assert resume_job(work, sink) is None and sink.logged == []
    assert resume_job(work, sink, offered=offered) == (4, work.checkpoint_dir(4))
    assert sink.steps() == [1, 2, 3, 4]  # the adopted checkpoint's epochs, once each
    assert checkpoint_history(work.checkpoint_dir(4)) == checkpoint_history(offered)

    older = JobWorkdir(tmp_path / "older")
    _fake_checkpoint(older.checkpoint_dir(2), 2)
    assert resume_job(work, sink, offered=older.checkpoint_dir(2)) == (4, work.checkpoint_dir(4))
    assert _on_disk(work) == ["epoch-0004"] and sink.steps() == [1, 2, 3, 4]


def test_a_run_whose_cuda_graphs_fell_back_says_why_once(tmp_path: Path) -> None:
    """The reason a job's steps went back to eager reaches its run as a tag, once: the warning
    alone stays in a trial's log, out of the MLflow UI where runs are watched."""
    from adapterfleet.training.lifecycle import TAG_CUDA_GRAPHS

    work, sink = JobWorkdir(tmp_path / "job"), ListSink()
    recorder = EpochRecorder(work, sink)

    def report(epoch: int, replays: int, fallback: str | None) -> EpochReport:
        return EpochReport(
            epoch=epoch, global_step=epoch, train_loss=0.5, learning_rate=1e-4,
            dev_metrics={"accuracy": 0.5}, metric="accuracy", best_metric=0.5, best_epoch=1,
            is_best=epoch == 1, epoch_seconds=1.0, elapsed_seconds=float(epoch),
            examples_per_second=10.0, _saver=lambda folder: _fake_checkpoint(folder, epoch),
            cuda_graph_replays=replays, cuda_graphs_fallback=fallback,
        )  # fmt: skip

    recorder.on_epoch_end(report(1, 9, None))
    assert sink.tags == []
    reason = "RuntimeError: Cannot copy between CPU and CUDA tensors during CUDA graph capture"
    recorder.on_epoch_end(report(2, 3, reason))
    recorder.on_epoch_end(report(3, 0, reason))
    assert sink.tags == [{TAG_CUDA_GRAPHS: f"eager from epoch 2: {reason}"}]
    assert [m["cuda_graph_replays"] for _, m in sink.logged] == [9.0, 3.0, 0.0]


def test_ending_quietly_says_what_failed_and_raises_nothing() -> None:
    class Unreachable(ListSink):
        def end(self, status: str) -> None:
            raise ConnectionError("refused")

    said: list[str] = []
    end_quietly(Unreachable(), "FAILED", said.append)
    assert said == ["could not mark run list-run FAILED: refused"]
    sink = ListSink()
    end_quietly(sink, "KILLED", said.append)
    assert sink.ended == ["KILLED"] and len(said) == 1


def _fake_checkpoint(folder: Path, epoch: int) -> Path:
    folder.mkdir(parents=True)
    history = [{"epoch": e, "dev_accuracy": 0.5} for e in range(1, epoch + 1)]
    (folder / "trainer_state.json").write_text(json.dumps({"epoch": epoch, "history": history}))
    return folder


def test_a_job_logs_its_best_epoch_and_result_at_that_step_once() -> None:
    """What a trial and a fusion log when they end (a fusion logged its result at step 0 and
    no `best_epoch`); a re-run of the finished job logs nothing again."""
    sink = ListSink()
    final = log_best(sink, {"accuracy": 0.75, "f1": 0.7}, 3)
    assert final == {"best_dev_accuracy": 0.75, "best_dev_f1": 0.7, "best_epoch": 3}
    assert log_best(sink, {"accuracy": 0.75, "f1": 0.7}, 3) == final
    assert sink.logged == [(3, final)]


def test_workdir_resumes_from_its_newest_complete_checkpoint(tmp_path: Path) -> None:
    work = JobWorkdir(tmp_path / "trial")
    assert work.latest_checkpoint() is None
    _fake_checkpoint(work.checkpoint_dir(1), 1)
    _fake_checkpoint(work.checkpoint_dir(2), 2)
    work.checkpoint_dir(3).mkdir()  # a crash while writing epoch 3: no state file
    assert work.latest_checkpoint() == (2, work.checkpoint_dir(2))
    # a newer checkpoint from elsewhere (Tune's copy) is adopted as the job's own
    adopted = work.adopt_checkpoint(_fake_checkpoint(tmp_path / "tune" / "checkpoint_4", 4))
    assert adopted == (4, work.checkpoint_dir(4))
    assert work.latest_checkpoint() == (4, work.checkpoint_dir(4))
    work.prune_checkpoints(keep_epoch=4)
    assert _on_disk(work) == ["epoch-0004"]
    work.clear_checkpoints()
    assert work.latest_checkpoint() is None


def test_a_run_a_stop_ended_is_killed_one_an_error_ended_failed() -> None:
    """The fusion and baseline jobs ended FAILED on Ctrl-C (a trial ended KILLED), so `status`
    said the fusion failed where it had been interrupted."""
    assert ended_by(KeyboardInterrupt()) == "KILLED" and ended_by(SystemExit(143)) == "KILLED"
    assert ended_by(RuntimeError("nan")) == "FAILED"
