"""The CLI as a user runs it: a real subprocess, exit codes and one-line errors."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import GLUE_DIR

ROOT = Path(__file__).resolve().parents[2]


def _run(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "adapterfleet.cli.app", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_help_lists_the_commands():
    result = _run("--help")
    assert result.returncode == 0
    for command in ("train", "fuse", "evaluate", "demo", "tasks"):
        assert command in result.stdout
    for args in (["-h"], ["train", "-h"], ["sweep", "resume", "-h"]):  # "No such option: -h"
        short = _run(*args)
        assert short.returncode == 0, short.stderr
        assert short.stdout == _run(*args[:-1], "--help").stdout


def test_bad_config_is_one_clear_line_and_exit_2(tmp_path):
    (tmp_path / "bad.yaml").write_text(
        "name: x\ndemo_tasks: true\nadapters: {reduction_factors: [0]}\n"
    )
    result = _run("tasks", "-c", str(tmp_path / "bad.yaml"))
    assert result.returncode == 2
    assert result.stderr.strip().startswith("error: adapters.reduction_factors")
    assert "Traceback" not in result.stderr


def test_missing_data_file_names_the_task_and_path(tmp_path):
    (tmp_path / "p.yaml").write_text(
        "data_root: .\ntasks:\n  t: {train: nope.tsv, dev: nope.tsv, text_fields: [s], "
        "label_names: [a, b]}\n"
    )
    result = _run("tasks", "-c", str(tmp_path / "p.yaml"))
    assert result.returncode == 2
    assert "task 't'" in result.stderr and "nope.tsv" in result.stderr


def _epoch_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("epoch ")]


@pytest.mark.skipif(not GLUE_DIR.is_dir(), reason=f"GLUE data not found at {GLUE_DIR}")
def test_train_evaluate_fuse_log_each_epoch_and_agree_on_the_score(tmp_path):
    """A slice of real RTE and the real MiniLM; stderr is a pipe here, as in a log file."""
    common = ["-c", "configs/glue.yaml", "-o", "tasks.rte.max_train_examples=32"]
    common += ["-o", "tasks.rte.max_dev_examples=16", "-o", "max_length=64"]
    common += ["-o", f"storage={tmp_path / 'runs'}"]
    run = tmp_path / "rte"
    trained = _run(
        "train", *common, "--task", "rte", "--reduction-factor", "32", "--lr", "1e-3",
        "--epochs", "2", "--out", str(run),
    )  # fmt: skip
    assert trained.returncode == 0, trained.stderr
    lines = _epoch_lines(trained.stderr)
    assert [line.split(":")[0] for line in lines] == ["epoch 1/2", "epoch 2/2"]
    assert all("train loss" in line and "dev accuracy" in line for line in lines)
    score = f"{json.loads((run / 'run.json').read_text())['dev_metrics']['accuracy']:.4f}"
    assert score in trained.stdout

    evaluated = _run("evaluate", *common, "--task", "rte", "--run", str(run))
    assert evaluated.returncode == 0, evaluated.stderr
    assert score in evaluated.stdout

    fused = _run(
        "fuse", *common, "--target", "rte", "--adapters", str(run / "adapter"),
        "--epochs", "1", "--seed", "3", "--out", str(tmp_path / "fusion"),
    )  # fmt: skip
    assert fused.returncode == 0, fused.stderr
    assert [line.split(":")[0] for line in _epoch_lines(fused.stderr)] == ["epoch 1/1"]
    assert json.loads((tmp_path / "fusion" / "run.json").read_text())["train_config"]["seed"] == 3


def test_train_says_when_patience_stopped_it_before_its_epochs(tmp_path):
    """A tester's `train --epochs 5` ended after epoch 4 with no word of why. A learning rate
    too small to move the dev accuracy: patience 1 stops it after the second epoch."""
    trained = _run(
        "train", "-c", "configs/demo.yaml", "--task", "demo_sentiment", "--lr", "1e-9",
        "--epochs", "4", "--out", str(tmp_path / "run"), "-o", f"storage={tmp_path / 'runs'}",
        "-o", "tasks.demo_sentiment.max_train_examples=32", "-o", "adapters.training.patience=1",
        "-o", "tasks.demo_sentiment.max_dev_examples=16",
    )  # fmt: skip
    assert trained.returncode == 0, trained.stderr
    assert [line.split(":")[0] for line in _epoch_lines(trained.stderr)] == [
        "epoch 1/4",
        "epoch 2/4",
    ]
    assert (
        "stopped early after epoch 2 of 4: dev accuracy had not improved for 1 epoch (patience)"
        in trained.stdout.splitlines()
    ), trained.stdout


def test_a_diverged_training_exits_1_and_a_refused_command_2(tmp_path):
    """A script could not tell `train --lr 1e12` (it ran, and diverged) from a typo in the
    config: both exited 2. A job that ran and failed (trials failed, diverged, a wait timed
    out) now exits 1; a command refused before any work, 2."""
    common = ["-c", "configs/demo.yaml", "--task", "demo_sentiment", "--epochs", "1"]
    common += ["--out", str(tmp_path / "run"), "-o", f"storage={tmp_path / 'runs'}"]
    common += ["-o", "tasks.demo_sentiment.max_train_examples=48"]
    common += ["-o", "tasks.demo_sentiment.max_dev_examples=16"]
    diverged = _run("train", *common, "--lr", "1e12")
    assert diverged.returncode == 1, diverged.stderr
    assert "training diverged" in diverged.stderr and "Traceback" not in diverged.stderr
    refused = _run("train", *common, "--lr", "1e-3", "-o", "max_length=-1")
    assert refused.returncode == 2 and "error: max_length" in refused.stderr, refused.stderr


@pytest.mark.skipif(not GLUE_DIR.is_dir(), reason=f"GLUE data not found at {GLUE_DIR}")
def test_train_a_regression_task_reports_its_correlations(tmp_path):
    """STS-B, a regression task: trained and selected on Pearson, its metrics in the table."""
    common = ["-c", "configs/glue.yaml", "-o", "tasks.stsb.max_train_examples=32"]
    common += ["-o", "tasks.stsb.max_dev_examples=16", "-o", "max_length=64"]
    common += ["-o", f"storage={tmp_path / 'runs'}"]
    run = tmp_path / "stsb"
    trained = _run(
        "train", *common, "--task", "stsb", "--lr", "1e-3", "--epochs", "1", "--out", str(run),
    )  # fmt: skip
    assert trained.returncode == 0, trained.stderr
    [line] = _epoch_lines(trained.stderr)
    assert "dev pearson" in line and "dev spearman" in line and "dev mse" in line
    assert "(best pearson" in line
    header = trained.stdout.splitlines()[0]
    assert all(f" {m} " in header for m in ("pearson", "spearman", "mse"))
    assert "accuracy" not in trained.stdout


def test_an_adapter_of_another_named_base_is_one_warning_line(tmp_path):
    """`fuse` over an adapter saved on another base of the same shape printed Python's
    `.../training/modes.py:246: UserWarning: ...` and the source line under it, which a user read
    past; now one `warning:` line naming both bases, and the fusion goes on."""
    from adapterfleet.adapters import (
        AdapterConfig,
        AdapterModel,
        add_adapter,
        load_encoder,
        save_adapter,
    )

    model = AdapterModel(load_encoder("minilm-l6"))
    add_adapter(model, "other", AdapterConfig(reduction_factor=16))
    save_adapter(model, "other", tmp_path / "adapter")
    saved = json.loads((tmp_path / "adapter" / "adapter_config.json").read_text())
    saved["base_model"]["name_or_path"] = "sentence-transformers/paraphrase-MiniLM-L6-v2"
    (tmp_path / "adapter" / "adapter_config.json").write_text(json.dumps(saved))
    fused = _run(
        "fuse", "-c", "configs/demo.yaml", "--target", "demo_delivery", "--epochs", "1",
        "--adapters", str(tmp_path / "adapter"), "--out", str(tmp_path / "fusion"),
        "-o", f"storage={tmp_path / 'runs'}", "-o", "tasks.demo_delivery.max_train_examples=16",
        "-o", "tasks.demo_delivery.max_dev_examples=8",
    )  # fmt: skip
    assert fused.returncode == 0, fused.stderr
    warned = [line for line in fused.stderr.splitlines() if "was trained on the base" in line]
    assert warned == [
        f"warning: {tmp_path / 'adapter'} was trained on the base "
        "'sentence-transformers/paraphrase-MiniLM-L6-v2', but this model is "
        "'sentence-transformers/all-MiniLM-L6-v2' (the same model type, width and depth); "
        "loading it anyway. It may not have been trained for this model"
    ], fused.stderr
    assert "UserWarning" not in fused.stderr and "names = [" not in fused.stderr
    for part in ("fusion/adapter_fusion_config.json", "head/head_config.json"):
        written = json.loads((tmp_path / "fusion" / part).read_text())
        written["base_model"]["name_or_path"] = "sentence-transformers/paraphrase-MiniLM-L6-v2"
        (tmp_path / "fusion" / part).write_text(json.dumps(written))
    scored = _run(
        "evaluate", "-c", "configs/demo.yaml", "--task", "demo_delivery",
        "--run", str(tmp_path / "fusion"), "-o", f"storage={tmp_path / 'runs'}",
        "-o", "tasks.demo_delivery.max_dev_examples=8",
    )  # fmt: skip
    assert scored.returncode == 0, scored.stderr
    warned = [line for line in scored.stderr.splitlines() if "was trained on the base" in line]
    assert len(warned) == 1, scored.stderr  # was one per file: adapter, fusion and head


# Every command that reads a config, with what else it requires.
CONFIG_COMMANDS = {
    "run": ["run", "{c}"],
    "sweep resume": ["sweep", "resume", "{c}"],
    "tasks": ["tasks", "{c}"],
    "train": ["train", "-c", "{c}", "--task", "t", "--out", "{d}/out"],
    "fuse": ["fuse", "-c", "{c}", "--target", "t", "--out", "{d}/out"],
    "evaluate": ["evaluate", "-c", "{c}", "--task", "t", "--run", "{d}/out"],
    "predict": ["predict", "t", "-c", "{c}", "--input", "{c}", "--out", "{d}/p.csv"],
    "prune": ["prune", "t", "-c", "{c}"],
}
LOADED_LATE = "import atexit, sys; from adapterfleet.cli.app import main; " + (
    "atexit.register(lambda: print(*sorted(m for m in ('torch', 'ray', 'mlflow', 'transformers') "
    "if m in sys.modules))); sys.exit(main())"
)


@pytest.mark.parametrize("command", sorted(CONFIG_COMMANDS))
def test_a_bad_config_is_refused_before_torch_or_ray_load(command: str, tmp_path: Path) -> None:
    """A mistyped key in the config took 7.5 s to refuse under `run` and `tasks`: torch, Ray
    and MLflow were imported before the config was read. Now they load after it."""
    (tmp_path / "c.yaml").write_text(
        "name: v\ntasks:\n  t: {train: a.csv, dev: a.csv, text: sentence}\n"
    )
    args = [a.format(c=tmp_path / "c.yaml", d=tmp_path) for a in CONFIG_COMMANDS[command]]
    result = subprocess.run(
        [sys.executable, "-c", LOADED_LATE, *args], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.strip().startswith("error: task 't', text: unknown key"), result.stderr
    assert result.stdout.strip() == "", f"{command} imported {result.stdout.strip()} first"


@pytest.mark.parametrize(
    "command",
    [
        ["train", "--task", "demo_delivery", "--out", "{d}/out"],
        ["fuse", "--target", "demo_delivery", "--adapters", "{d}/a", "--out", "{d}/out"],
        ["evaluate", "--task", "demo_delivery", "--run", "{d}/out"],
    ],
    ids=lambda c: c[0],
)
def test_a_storage_that_is_a_file_is_one_line_for_the_single_runs(command, tmp_path):
    """`run` and `tasks` refused it in one line; train, fuse and evaluate printed 52 lines of
    NotADirectoryError from the token cache, exit 1."""
    (tmp_path / "afile").write_text("")
    args = [a.format(d=tmp_path) for a in command]
    result = _run(*args, "-c", "configs/demo.yaml", "-o", f"storage={tmp_path / 'afile'}")
    assert result.returncode == 2, result.stderr[-2000:]
    assert result.stderr.strip() == (
        f"error: storage: cannot use {tmp_path / 'afile'} ({tmp_path / 'afile'} is a file, not "
        "a folder); choose a writable folder (-o storage=<folder>)"
    ), result.stderr[-2000:]
