"""The lines a run prints: an epoch in one line, the trial counts, durations, the relay that
prints a Ray worker's marked lines plain and drops the rest at the default level, and the live
footer a terminal gets (on a real pseudo-terminal)."""

from __future__ import annotations

import io
import os
import pty
import re
import select
import time

import pytest

from adapterfleet.console import Level, LiveFooter, duration_text, progress_say
from adapterfleet.orchestration.relay import END, WorkerRelay, WorkerSay
from adapterfleet.training.callbacks import epoch_line
from adapterfleet.tuning.progress import trial_counts


def test_an_epoch_is_one_line_with_the_best_so_far_and_its_time() -> None:
    values = {
        "epoch": 2,
        "train_loss": 0.43121,
        "dev_accuracy": 0.97,
        "dev_f1": 0.5,
        "best_dev_accuracy": 0.98,
        "best_epoch": 1,
        "epoch_seconds": 11.4,
        "config": {"task": "x"},  # what else a Tune result holds is left out
    }
    assert epoch_line(values, "accuracy", 10, "trial t-rf16") == (
        "trial t-rf16 epoch 2/10: train loss 0.4312, dev accuracy 0.9700, dev f1 0.5000 "
        "(best accuracy 0.9800 at epoch 1), 11 s"
    )


def test_trials_not_created_yet_count_as_pending() -> None:
    statuses = ["TERMINATED", "ERROR", "RUNNING", "PENDING"]
    assert trial_counts(statuses, 6) == "trials 2 done, 1 running, 3 pending"


@pytest.mark.parametrize(
    ("seconds", "text"), [(44.6, "45 s"), (112, "1 min 52 s"), (7500, "2 h 5 min")]
)
def test_durations_read_as_words(seconds: float, text: str) -> None:
    assert duration_text(seconds) == text


@pytest.mark.parametrize("level", [Level.QUIET, Level.DEFAULT])
def test_a_workers_own_lines_come_plain_and_the_rest_stays_in_its_log(
    level: Level, capsys: pytest.CaptureFixture[str]
) -> None:
    say = WorkerSay("fusion fruit")
    say("fusion fruit: epoch 1/2: train loss 0.5000")
    say(END)
    worker_stdout = capsys.readouterr().out.splitlines()
    noise = "2026/11/24 08:35:50 INFO mlflow.system_metrics.system_metrics_monitor: Started"
    shown: list[str] = []
    WorkerRelay(shown.append, level).handle({"lines": [*worker_stdout, noise], "pid": 7})
    assert shown == ["fusion fruit: epoch 1/2: train loss 0.5000"]


def _read_all(fd: int) -> str:
    chunks = []
    while True:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if not ready:
            return b"".join(chunks).decode()
        chunks.append(os.read(fd, 65536))


def test_on_a_terminal_the_lines_scroll_above_a_live_footer_that_is_cleared_at_the_end() -> None:
    main, replica = pty.openpty()
    with os.fdopen(replica, "w") as terminal:
        assert terminal.isatty()
        with progress_say(Level.DEFAULT, print, "pipeline demo", terminal) as say:
            assert isinstance(say, LiveFooter)
            say("trial t1 epoch 1/2: train loss 0.5000 [trials 0 done, 2 running, 0 pending]")
            assert say.footer().startswith("pipeline demo · 0 s · trials 0 done, 2 running")
            time.sleep(1.3)  # the footer is redrawn every second meanwhile
            say("task t1: registered")
        shown = _read_all(main)
    os.close(main)
    assert "trial t1 epoch 1/2" in shown and "task t1: registered\r\n" in shown
    footers = re.findall(r"\x1b\[7m (pipeline demo · [^\x1b]*) \x1b\[0m", shown)
    assert len(footers) >= 3 and footers[-1].endswith("trials 0 done, 2 running, 0 pending")
    assert shown.endswith("\r\x1b[2K")  # the footer is gone before the summary


def test_off_a_terminal_lines_are_plain_and_quiet_says_nothing() -> None:
    log = io.StringIO()
    with progress_say(Level.DEFAULT, log.write, "pipeline demo", log) as say:
        say("a line")
    assert log.getvalue() == "a line"
    with progress_say(Level.QUIET, log.write, "pipeline demo", log) as say:
        say("never shown")
    with progress_say(Level.VERBOSE, log.write, "pipeline demo", io.StringIO()) as say:
        assert say == log.write
    assert log.getvalue() == "a line"


def test_tunes_traceback_of_a_failed_trial_stays_out_of_the_console(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A trial that raised (the tracking server down for minutes) printed Tune's ERROR with a
    70-line traceback after the trial's own `failed (<cause>)` line; other Tune errors pass. Tune's
    notices of its own slow loop are held back too, its other warnings pass."""
    import logging

    from adapterfleet.orchestration.relay import (
        TUNE_CONTROLLER,
        TUNE_RUN,
        TUNE_TIMER,
        library_output,
    )

    tune = logging.getLogger(TUNE_CONTROLLER)
    slow = "The `callbacks.on_trial_result` operation took 1.254 s, which may be a performance "
    slow += "bottleneck."  # four of these in a resumed run against a tracking server
    with library_output(Level.DEFAULT):
        tune.error("Trial task failed for trial adapter_trial_1", exc_info=ValueError("down"))
        tune.error("the controller itself broke")
        logging.getLogger(TUNE_RUN).error("Trials did not complete: %s", ["adapter_trial_1"])
        logging.getLogger(TUNE_TIMER).warning(slow)
        logging.getLogger(TUNE_TIMER).warning("another warning of Tune's")
    assert [r.getMessage() for r in caplog.records] == [
        "the controller itself broke",
        "another warning of Tune's",
    ]
    caplog.clear()
    with library_output(Level.VERBOSE):
        tune.error("Trial task failed for trial adapter_trial_2")
    assert [r.getMessage() for r in caplog.records] == [
        "Trial task failed for trial adapter_trial_2"
    ]


def test_a_registry_call_that_gave_up_says_how_long_it_really_tried() -> None:
    """One attempt may take longer than the deadline (MLflow retries a request itself): the
    error said "after 1 attempts over 120s" after eight minutes."""
    from adapterfleet.registry.errors import RegistryError, call_with_retry

    def down() -> None:
        time.sleep(1.2)
        raise ConnectionError("refused")

    with pytest.raises(RegistryError, match=r"^log metrics failed after 1 attempt over 1s: "):
        call_with_retry(down, what="log metrics", timeout_s=0.1)


def test_a_failed_ray_task_is_said_by_its_cause_not_rays_traceback(ray_local, tmp_path) -> None:
    """A baseline's error was cut to 300 characters of Ray's traceback, which ended before the
    cause (`reduction_factor 7 does not divide ...`)."""
    import json

    import ray

    from adapterfleet.config import load_config
    from adapterfleet.errors import cause_text

    said = []
    for function, argument in ((json.loads, "[1,"), (load_config, tmp_path / "none.yaml")):
        with pytest.raises(Exception) as caught:  # noqa: PT011 - Ray's own wrapper of it
            ray.get(ray.remote(max_retries=0)(function).remote(argument))
        assert "ray::" in str(caught.value) and "File " in str(caught.value)  # the traceback
        said.append(cause_text(caught.value))
    assert said == [
        "JSONDecodeError: Expecting value: line 1 column 4 (char 3)",
        f"config file {tmp_path / 'none.yaml'} not found; pass the path of a pipeline YAML file",
    ]
    assert cause_text(RuntimeError("z" * 400), limit=10) == "z" * 9 + "…"


def test_a_dead_ray_worker_is_said_in_one_short_line(ray_local) -> None:
    """A trial whose worker was killed said `failed (The actor died unexpectedly ...` cut at
    300 characters of Ray's advice on OOM killers, before it said which process."""
    import os
    import signal

    import ray

    from adapterfleet.errors import cause_text

    @ray.remote(max_restarts=0)
    class Sleeper:
        def pid(self) -> int:
            return os.getpid()

        def wait(self) -> None:
            import time

            time.sleep(60)

    sleeper = Sleeper.remote()
    pid = ray.get(sleeper.pid.remote())
    waiting = sleeper.wait.remote()
    os.kill(pid, signal.SIGKILL)
    with pytest.raises(ray.exceptions.RayActorError) as caught:
        ray.get(waiting, timeout=60)
    said = cause_text(caught.value)
    assert said.startswith(f"its Ray worker pid {pid} on "), said
    assert said.endswith("died: killed, out of memory or its node left; `ray logs` says which")


def _shown_within(capsys: pytest.CaptureFixture[str], text: str, seconds: float) -> bool:
    shown = ""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and text not in shown:
        time.sleep(0.2)
        captured = capsys.readouterr()
        shown += captured.out + captured.err
    return text in shown


@pytest.mark.parametrize(
    ("level", "printed"),
    [(Level.DEFAULT, False), (Level.VERBOSE, True)],
    ids=["default", "verbose"],
)
def test_after_ctrl_c_a_workers_late_line_is_not_printed_below_verbose(
    ray_local, capsys: pytest.CaptureFixture[str], level: Level, printed: bool
) -> None:
    """After Ctrl-C with workers, Ray Train's `(PlacementGroupCleaner pid=...) Failed to query
    Ray Train Controller actor state` came before the CLI's `interrupted:` line: the relay gave
    Ray its printer back on the way out, while Ray was still stopping. A line a worker prints
    then is printed only at `--verbose`; a normal end gives Ray its printer back."""
    import uuid

    import ray
    from ray._private.ray_logging import global_worker_stdstream_dispatcher as dispatcher

    from adapterfleet.orchestration.relay import HANDLER, RAY_PRINTER, console

    before = list(dispatcher.handlers)
    assert RAY_PRINTER in [name for name, _ in before]
    try:
        with console(level, print) as relay:
            relay.attach()
        assert dispatcher.handlers == before
        with pytest.raises(KeyboardInterrupt), console(level, print) as relay:
            relay.attach()
            raise KeyboardInterrupt
        names = [name for name, _ in dispatcher.handlers]
        assert HANDLER not in names and (RAY_PRINTER in names) is printed

        def say_late(text: str) -> None:  # defined here: sent by value to the worker
            print(text)

        late = f"a late line {uuid.uuid4().hex}"  # unique: Ray folds repeated lines
        ray.get(ray.remote(say_late).remote(late))
        assert _shown_within(capsys, late, 5.0) is printed  # it comes in ~1 s when printed
    finally:
        dispatcher.handlers = before


def _footer_after(lines: list[str]) -> list[str]:
    """The counts a live footer shows after each of `lines`."""
    live = LiveFooter("pipeline demo", io.StringIO())
    shown = []
    for line in lines:
        live(line)
        shown.append(live.footer().split(" · ", 2)[2])
    return shown


def _epoch(trial: str, statuses: list[str], fusions: list[str]) -> str:
    """A trial's epoch line as the sweep prints it, with the fusion gates in `fusions`."""
    from types import SimpleNamespace

    from adapterfleet.orchestration.pipeline import fusion_note
    from adapterfleet.tuning.progress import trial_epoch_line, with_note
    from adapterfleet.tuning.spec import TrialParams

    params = TrialParams(trial, 16, 1e-3, 7)
    result = {"epoch": 2, "train_loss": 0.4, "dev_accuracy": 0.8, "best_dev_accuracy": 0.8}
    gates = [SimpleNamespace(state=state) for state in fusions]
    counts = with_note(trial_counts(statuses, 2), lambda: fusion_note(gates))
    line = trial_epoch_line(params, {**result, "best_epoch": 2}, "accuracy", 3, counts)
    assert line is not None
    return line


def _fusion_registered(target: str, trained: bool = True) -> str:
    """The driver's last line of a fusion (orchestration/pipeline.py's gate)."""
    from adapterfleet.orchestration.fusion_job import FusionOutcome, registered_text
    from adapterfleet.registry.info import ModelVersionInfo

    version = ModelVersionInfo(f"demo.fusion.{target}", 1, "file:///x", "r1")
    outcome = FusionOutcome(target, version, {"accuracy": 0.81}, trained, 3.0, 0.4)
    return f"fusion {target}: {registered_text(outcome, 'accuracy')}"


def test_the_footer_follows_the_trials_ending_and_the_fusion_training_to_its_end() -> None:
    """The lines after the last epoch carry no counts: the footer stayed at `1 running; fusions
    1 waiting` while the fusion trained (100 s of the demo). It moves on from those lines."""
    shown = _footer_after(
        [
            _epoch("a", ["RUNNING", "RUNNING"], ["waiting"]),
            "trial a-rf16-lr0.001-s7: dev accuracy 0.8000 (epoch 2) [1/1]",
            _epoch("b", ["TERMINATED", "RUNNING"], ["waiting"]),
            "trial b-rf16-lr0.001-s7: dev accuracy 0.8000 (epoch 2), patience 1 ended it at "
            "epoch 2/3 [1/1]",
            "task b: registered demo.adapter.b v1 (@best) from trial b-rf16-lr0.001-s7, dev "
            "accuracy 0.8000",
            "fusion demo_delivery: training over a:v1,b:v1 (0.4s after the last adapter)",
            "fusion demo_delivery (fusion-1) epoch 3/10: train loss 0.3000, dev accuracy 0.8100 "
            "(best accuracy 0.8100 at epoch 3), 9 s",
            _fusion_registered("demo_delivery"),
        ]
    )
    trials = "trials {} done, {} running, 0 pending; fusions 1 {}"
    assert shown == [
        trials.format(0, 2, "waiting"),
        trials.format(1, 1, "waiting"),
        trials.format(1, 1, "waiting"),
        trials.format(2, 0, "waiting"),
        trials.format(2, 0, "waiting"),
        trials.format(2, 0, "training"),
        trials.format(2, 0, "training"),
        trials.format(2, 0, "done"),
    ]


def test_a_fusion_the_counts_had_training_already_is_not_counted_twice() -> None:
    """Two fusions: one's gate trains (the epoch line says so) before its first line comes;
    the other's registered version is kept. A footer without counts yet goes by the fusions'
    own lines, and counts of another shape are shown as they are."""
    shown = _footer_after(
        [
            _epoch("a", ["TERMINATED", "RUNNING"], ["training", "waiting"]),
            "fusion x: training over a:v1 (0.4s after the last adapter)",
            "trial b-rf16-lr0.001-s7: FAILED [1/1]",
            "trial b-rf16-lr0.001-s7: FAILED [1/1]",  # said again: counted once
            _fusion_registered("y", trained=False),
            _fusion_registered("x"),
        ]
    )
    assert shown == [
        "trials 1 done, 1 running, 0 pending; fusions 1 waiting, 1 training",
        "trials 1 done, 1 running, 0 pending; fusions 1 waiting, 1 training",
        "trials 2 done, 0 running, 0 pending; fusions 1 waiting, 1 training",
        "trials 2 done, 0 running, 0 pending; fusions 1 waiting, 1 training",
        "trials 2 done, 0 running, 0 pending; fusions 1 training, 1 done",
        "trials 2 done, 0 running, 0 pending; fusions 2 done",
    ]
    assert _footer_after(["pipeline demo: validating", "fusion x: training over a:v1"]) == [
        "starting",
        "fusions 1 training",
    ]
    assert _footer_after(["trial a epoch 1: ... [trials 0 of 2]", "trial a: x [1/1]"]) == [
        "trials 0 of 2",
        "trials 0 of 2",
    ]


def test_a_failed_fusion_is_said_and_the_footer_counts_it_failed() -> None:
    """A fusion that failed printed nothing until the summary: the footer kept `fusions 1
    training` for as long as the baselines ran after it."""
    from adapterfleet.orchestration.pipeline import fusion_failed_line

    failed = fusion_failed_line("x", RuntimeError("dev split is empty"))
    assert failed == "fusion x: failed: dev split is empty"
    from ray.exceptions import TaskCancelledError  # `adapterfleet stop` during the fusion

    assert fusion_failed_line("x", TaskCancelledError()) is None  # it read "failed: ..."
    assert fusion_failed_line("x", RuntimeError("gone"), stopped=True) is None
    shown = _footer_after(
        [
            _epoch("a", ["TERMINATED", "TERMINATED"], ["training", "training"]),
            failed,
            failed,  # said again: counted once
            _fusion_registered("y"),
        ]
    )
    assert shown == [
        "trials 2 done, 0 running, 0 pending; fusions 2 training",
        "trials 2 done, 0 running, 0 pending; fusions 1 training, 1 failed",
        "trials 2 done, 0 running, 0 pending; fusions 1 training, 1 failed",
        "trials 2 done, 0 running, 0 pending; fusions 1 done, 1 failed",
    ]
