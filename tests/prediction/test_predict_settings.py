"""What a user-tester found of `predict`: a version trained at another max_length or on other
text fields predicted without a word; `--out -` into a pipe closed early exited 1; an input of
a header and no rows was refused; a tsv that looks quoted was said without `warning:`; and the
counts of one run were written two ways."""

from __future__ import annotations

import csv
import functools
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from adapterfleet.data import TaskError
from adapterfleet.orchestration.predict import predict_file

ROOT = Path(__file__).resolve().parents[2]
LONG = " ".join(["apple banana river lake"] * 6)  # 24 words: cut at max_length 8


@pytest.fixture(scope="module")
def settled(world, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the world's store whose adapter versions record the settings they were trained
    with, as the sweep's registration records them (the `settings` tag): fruit's as the config
    says them now (max_length 24), water's as if trained on text_fields [note, text]."""
    from mlflow import MlflowClient

    from adapterfleet.registry import adapter_model_name
    from adapterfleet.tuning.settings import TAG_SETTINGS, settings_tag

    runs = tmp_path_factory.mktemp("settled") / "runs"
    runs.mkdir()
    shutil.copy(Path(world.config.storage) / "mlflow.db", runs / "mlflow.db")
    client = MlflowClient(f"sqlite:///{runs / 'mlflow.db'}")
    water = json.loads(settings_tag(world.config, "water") or "{}")
    water["task"]["text_fields"] = ["note", "text"]
    for task, tag in (("fruit", settings_tag(world.config, "fruit")), ("water", json.dumps(water))):
        name = adapter_model_name(world.config.registry_prefix, task)
        client.set_model_version_tag(name, "1", TAG_SETTINGS, tag)
    return runs


def _config(world, runs: Path, *overrides: str):
    from adapterfleet.config import load_config

    return load_config(world.config_path, [f"storage={runs}", *overrides])


def _write(path: Path, texts: list[str]) -> Path:
    path.write_text("id\ttext\n" + "".join(f"ex{i}\t{t}\n" for i, t in enumerate(texts)))
    return path


def test_a_version_trained_at_another_max_length_is_said_and_the_cut_line_is_true(
    world, settled, tmp_path
):
    """`-o max_length=8` predicted at 8 without a word, then said its rows were cut `as
    training cuts its rows` (training cut at 24). Said for the adapter and for the fusion
    (which trained at its adapters' max_length); nothing at the length it trained at."""
    tsv = _write(tmp_path / "in.tsv", [LONG, "apple", LONG])
    short = _config(world, settled, "max_length=8")
    for adapter, name in ((True, "adapter"), (False, "fusion")):
        said: list[str] = []
        predict_file(short, "fruit", tsv, tmp_path / f"{name}.csv", adapter=adapter,
                     say=said.append)  # fmt: skip
        warned = [line for line in said if line.startswith("warning: predict fruit: ")]
        assert len(warned) == 1, said
        assert (
            f"{world.config.registry_prefix}.{name}.fruit v1 was trained with max_length 24"
            in (warned[0])
        )
        assert "reads its rows at max_length 8" in warned[0]
        assert "give -o max_length=24" in warned[0]
        (cut,) = [line for line in said if "were cut" in line]
        assert cut.startswith("predict fruit: 2 of 3 rows were cut at max_length 8 tokens")
        assert "as training cuts" not in cut and "trained on rows cut at 24" in cut
    said = []
    predict_file(_config(world, settled), "fruit", tsv, tmp_path / "same.csv", say=said.append)
    assert not [line for line in said if "warning" in line], said


def test_a_version_trained_on_other_text_fields_is_said(world, settled, tmp_path):
    """A task's text_fields changed since its adapter trained (swapped or one dropped)
    predicted the other texts without a word, where changed label_names are refused."""
    tsv = _write(tmp_path / "in.tsv", ["river lake", "boat"])
    said: list[str] = []
    config = _config(world, settled)
    predict_file(config, "water", tsv, tmp_path / "out.csv", adapter=True, say=said.append)
    (warned,) = [line for line in said if line.startswith("warning: ")]
    assert "was trained on tasks.water.text_fields [note, text], and predict reads [text]" in (
        warned
    )
    assert "-o 'tasks.water.text_fields=[note, text]'" in warned


def test_a_version_that_records_no_settings_says_nothing(world, tmp_path):
    """The world's own versions were registered without the tag (as versions from before
    it): nothing to compare, nothing said."""
    from adapterfleet.config import load_config

    tsv = _write(tmp_path / "in.tsv", [LONG])
    said: list[str] = []
    short = load_config(world.config_path, ["max_length=8"])
    predict_file(short, "fruit", tsv, tmp_path / "out.csv", adapter=True, say=said.append)
    assert not [line for line in said if "warning" in line], said
    assert any("as training cuts its rows" in line for line in said), said


def test_evaluate_of_a_pulled_folder_says_the_max_length_it_was_trained_at(
    world, settled, tmp_path
):
    """`evaluate --run <pulled folder> -o max_length=8` was silent, where a train run folder
    says its dev metrics were measured on other rows."""
    from adapterfleet.orchestration.local import evaluate_run
    from adapterfleet.registry import adapter_model_name
    from adapterfleet.registry.pulled import pull_folder

    uri = f"sqlite:///{settled / 'mlflow.db'}"
    name = adapter_model_name(world.config.registry_prefix, "fruit")
    folder = pull_folder(uri, name, tmp_path / "pulled").folder
    with pytest.warns(UserWarning, match=r"pulled \(.*fruit v1\) was trained with max_length 24"):
        evaluate_run(_config(world, settled, "max_length=8"), "fruit", folder)


@pytest.mark.parametrize(
    ("suffix", "expected"),
    [
        ("csv", "row,id,prediction,prob_no,prob_yes\r\n"),
        ("tsv", "row\tid\tprediction\tprob_no\tprob_yes\r\n"),
        ("jsonl", ""),
    ],
)
def test_an_input_of_no_rows_writes_an_empty_output(world, tmp_path, suffix, expected):
    """A nightly job's input with a header and no rows was refused (`holds no rows; give at
    least one row`) and wrote nothing: now the output of no rows, in its format."""
    (tmp_path / "in.csv").write_text("id,text\n")
    said: list[str] = []
    out = tmp_path / f"out.{suffix}"
    done = predict_file(world.config, "fruit", tmp_path / "in.csv", out, say=said.append)
    assert done.rows == 0 and out.read_bytes().decode() == expected
    assert any("in.csv holds no rows" in line for line in said), said
    assert said[-1] == f"predict fruit: wrote 0 rows to {out}"


def test_an_input_of_no_rows_writes_a_parquet_file_of_the_columns(world, tmp_path):
    import pyarrow.parquet as pq

    (tmp_path / "in.jsonl").write_text("")  # JSON lines of no record: an empty file
    out = tmp_path / "out.parquet"
    predict_file(world.config, "fruit", tmp_path / "in.jsonl", out, say=lambda _: None)
    table = pq.read_table(out)
    assert table.num_rows == 0
    assert table.column_names == ["row", "prediction", "prob_no", "prob_yes"]
    (tmp_path / "empty.csv").write_text("")  # a header expected, and not even that: refused
    with pytest.raises(TaskError, match="empty.csv is empty"):
        predict_file(world.config, "fruit", tmp_path / "empty.csv", out, say=lambda _: None)


def test_counts_of_one_run_are_written_alike(world, tmp_path):
    """`24 of 3,000 rows were cut`, then `wrote 3000 rows`."""
    from adapterfleet.config import load_config

    tsv = _write(tmp_path / "in.tsv", [LONG] * 5 + ["apple"] * 995)
    said: list[str] = []
    short = load_config(world.config_path, ["max_length=8"])
    predict_file(short, "fruit", tsv, tmp_path / "out.jsonl", adapter=True, say=said.append)
    assert said[0].endswith("1,000 rows of " + str(tsv)), said
    assert any(line.startswith("predict fruit: 5 of 1,000 rows were cut") for line in said)
    assert said[-1] == f"predict fruit: wrote 1,000 rows to {tmp_path / 'out.jsonl'}"


def _predict_cli(world, *args: str | Path, **options) -> subprocess.Popen[str]:
    command = [sys.executable, "-m", "adapterfleet.cli.app", "predict", "fruit"]
    command += ["-c", str(world.config_path), *map(str, args)]
    return subprocess.Popen(command, cwd=ROOT, text=True, stderr=subprocess.PIPE, **options)


def test_out_to_a_pipe_closed_early_ends_quietly_as_a_unix_tool(world, tmp_path):
    """`predict ... --out - | head -1` exited 1; now it ends as a tool killed by SIGPIPE does:
    status 141, no traceback, no error line. Here the reader is gone before the first line."""
    tsv = _write(tmp_path / "in.tsv", ["apple"] * 50)
    child = _predict_cli(world, "--input", tsv, "--out", "-", stdout=subprocess.PIPE)
    assert child.stdout is not None
    child.stdout.close()
    _, stderr = child.communicate(timeout=300)
    assert child.returncode == 141, stderr[-3000:]
    assert "Traceback" not in stderr and "error" not in stderr, stderr


def test_a_tsv_that_looks_quoted_is_said_as_a_warning(world, tmp_path):
    """The notice that a tsv read without quotes looks written with them had no `warning:`."""
    tsv = tmp_path / "in.tsv"
    tsv.write_text('id\ttext\nex0\tapple\nex1\t"river, ""lake"""\n')
    child = _predict_cli(world, "--input", tsv, "--out", tmp_path / "out.csv")
    _, stderr = child.communicate(timeout=300)
    assert child.returncode == 0, stderr[-3000:]
    (line,) = [line for line in stderr.splitlines() if "read without quotes" in line]
    assert line.startswith(f"warning: task 'fruit', input: {tsv} is read without quotes"), line
    with (tmp_path / "out.csv").open(newline="") as handle:
        assert len(list(csv.DictReader(handle))) == 2


def test_input_from_a_closed_standard_input_is_one_error_line(world, tmp_path):
    """`predict ... --input - <&-` (a script's stdin closed) ended in a traceback:
    `AttributeError: 'NoneType' object has no attribute 'buffer'`."""
    out = tmp_path / "out.csv"
    closed = functools.partial(os.close, 0)  # the child starts with no fd 0
    child = _predict_cli(world, "--input", "-", "--format", "csv", "--out", out, preexec_fn=closed)
    _, stderr = child.communicate(timeout=300)
    assert child.returncode == 2, stderr[-3000:]
    assert "Traceback" not in stderr, stderr[-3000:]
    assert "standard input is closed; pipe the rows in" in stderr, stderr
    assert not out.exists()


def test_a_fusion_of_other_adapters_than_the_config_lists_is_said(world, tmp_path):
    """A notebook user compared two adapter sets for one target; the other set's fusion had
    taken @best, and predict used it without a word, where `status` names the difference."""
    fused = world.config.fusion.targets["fruit"]
    assert len(fused) > 1
    tsv = _write(tmp_path / "in.tsv", ["apple"])
    fewer = _config(world, Path(world.config.storage), f"fusion.targets.fruit=[{fused[0]}]")
    said: list[str] = []
    predict_file(fewer, "fruit", tsv, tmp_path / "out.csv", say=said.append)
    (warned,) = [line for line in said if line.startswith("warning: ")]
    name = f"{world.config.registry_prefix}.fusion.fruit v1"
    extra = ", ".join(fused[1:])
    assert warned == (
        f"warning: predict fruit: {name} fuses {extra}, which this config does not list for it: "
        "made by another config of this pipeline name, or before its target changed"
    )
    said = []
    predict_file(world.config, "fruit", tsv, tmp_path / "same.csv", say=said.append)
    assert not [line for line in said if "warning" in line], said


def test_an_empty_standard_input_is_named_as_such(world, tmp_path):
    """`predict ... --input - --format tsv </dev/null` named its spooled copy:
    `input.path: /tmp/adapterfleet-stdin-dijwwh0b/stdin.tsv is empty (0 bytes)`."""
    out = tmp_path / "out.csv"
    child = _predict_cli(
        world, "--input", "-", "--format", "tsv", "--out", out, stdin=subprocess.DEVNULL
    )
    _, stderr = child.communicate(timeout=300)
    assert child.returncode == 2, stderr[-3000:]
    assert "task 'fruit', --input: standard input is empty" in stderr, stderr
    assert "adapterfleet-stdin-" not in stderr and not out.exists()
