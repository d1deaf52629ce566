"""Ordinary mistakes at the command line (issue #22): each is one `error:` line naming what is
wrong and the fix, exit status 2, no traceback, nothing written; read-only commands never
create a tracking store, and a store that does not answer is said, not waited on in silence."""

from __future__ import annotations

import os
import socket
import time
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from adapterfleet.cli.app import app

runner = CliRunner()
CONFIG = """name: p
data_root: .
storage: {storage}
tasks:
  a: {{train: t.tsv, dev: t.tsv, text_fields: [sentence], label_names: ["0", "1"]}}
  b: {{train: t.tsv, dev: t.tsv, text_fields: [sentence], label_names: ["0", "1"]}}
adapters: {{reduction_factors: [16], training: {{max_epochs: 1}}}}
fusion: {{targets: {{a: all}}}}
"""


@pytest.fixture
def pipeline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A small valid config whose storage (tmp_path/runs) does not exist yet."""
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "t.tsv").write_text("sentence\tlabel\na b\t0\nc d\t1\n")
    path = tmp_path / "pipe.yaml"
    path.write_text(CONFIG.format(storage=tmp_path / "runs"))
    return path


def refused(result: Result, *words: str) -> str:
    """The one `error:` line of a refused command (exit 2, no traceback); it holds `words`."""
    assert result.exit_code == 2, (result.output, result.exception)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output
    errors = [line for line in result.output.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, result.output
    assert all(word in errors[0] for word in words), errors[0]
    return errors[0]


# ------------------------------------------------------------- tracebacks on ordinary mistakes


def test_a_config_that_is_not_utf8_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "latin.yaml"
    path.write_bytes("name: caf\xe9\n".encode("latin-1"))
    refused(runner.invoke(app, ["tasks", "-c", str(path)]), "not UTF-8", "save the config as UTF-8")


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("", ("is empty: it holds no settings", "name, base_model, tasks", "-c demo")),
        ("# settings to come\n\n", ("is empty: it holds no settings",)),
        ("- name: x\n", ("expected a mapping of settings at the top level", "got a list")),
    ],
)
def test_an_empty_config_says_it_is_empty(tmp_path: Path, text: str, words: tuple[str]) -> None:
    """An empty file said `expected a mapping of settings at the top level`, which a user read
    as a syntax problem; `submit` read the file with a loader of its own that said the same."""
    from adapterfleet.config import ConfigError
    from adapterfleet.orchestration.job_upload import config_document

    path = tmp_path / "pipe.yaml"
    path.write_text(text)
    line = refused(runner.invoke(app, ["tasks", "-c", str(path)]), str(path), *words)
    with pytest.raises(ConfigError) as caught:
        config_document(path, [])
    assert f"error: {caught.value}" == line


@pytest.mark.parametrize(
    ("override", "words"),
    [
        ("tasks.a.train={path: t.tsv, encoding: utf-16}", ("train.encoding", "is not utf-16")),
        ("tasks.a.train=loop", ("task 'a'", "symlink loop")),
        ("data_root=loop", ("data_root:", "symlink loop")),
        ("storage=loop/runs", ("storage:", "symlink loop")),
    ],
)
def test_data_that_cannot_be_read_is_one_line(
    pipeline: Path, override: str, words: tuple[str, ...]
) -> None:
    (pipeline.parent / "loop").symlink_to(pipeline.parent / "loop")
    refused(runner.invoke(app, ["tasks", "-c", str(pipeline), "-o", override]), *words)


@pytest.mark.skipif(not Path("/proc/self/mem").exists(), reason="needs Linux /proc")
def test_an_unreadable_data_file_is_one_line(pipeline: Path) -> None:
    override = "tasks.a.train={path: /proc/self/mem, format: tsv}"  # unreadable even for root
    result = runner.invoke(app, ["tasks", "-c", str(pipeline), "-o", override])
    refused(result, "task 'a', train.path: cannot read /proc/self/mem")


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--task", "a", "--mode", "lora"], ("--mode: 'lora' is unknown", "st-a")),
        (["--task", "a", "--lr", "-0.1"], ("--lr: must be a number > 0, got -0.1",)),
        (["--task", "a", "--epochs", "0"], ("--epochs: must be an integer >= 1",)),
        (["--task", "a", "--reduction-factor", "7"], ("--reduction-factor", "does not divide")),
        (["--task", "ghost"], ("--task: 'ghost' is not a task of the config", "a, b")),
    ],
)
def test_single_run_mistakes_are_one_line_and_write_nothing(
    pipeline: Path, args: list[str], words: tuple[str, ...]
) -> None:
    out = pipeline.parent / "out"
    result = runner.invoke(app, ["train", "-c", str(pipeline), "--out", str(out), *args])
    refused(result, *words)
    assert not out.exists() and not (pipeline.parent / "runs").exists()


def test_an_unknown_fusion_target_is_one_line(pipeline: Path) -> None:
    args = ["fuse", "-c", str(pipeline), "--target", "ghost", "--adapters", "x", "--out", "o"]
    refused(runner.invoke(app, args), "--target: 'ghost' is not a task")


# ------------------------------------------------------------------------- unclear messages


def test_a_set_value_that_is_not_yaml_says_so(pipeline: Path) -> None:
    override = "adapters.training.learning_rate=["
    result = runner.invoke(app, ["tasks", "-c", str(pipeline), "-o", override])
    line = refused(result, "is not valid YAML", "quote it")
    assert "expected a number" not in line


@pytest.mark.parametrize("override", ["adapters.training.max_epochs=", "name= "])
def test_a_set_value_left_empty_says_so(pipeline: Path, override: str) -> None:
    """It read as null: `adapters.training.max_epochs must be an integer >= 1, got None`, or the
    key's default without a word."""
    result = runner.invoke(app, ["run", "-c", str(pipeline), "-o", override])
    line = refused(result, f"override {override!r}: the value after '=' is empty", "null for none")
    assert "None" not in line
    assert not (pipeline.parent / "runs").exists()


def test_a_config_path_that_is_a_folder_says_so(pipeline: Path) -> None:
    """It said `config file ... not found` of a folder that is there."""
    folder = pipeline.parent
    line = refused(runner.invoke(app, ["run", str(folder)]), f"config file {folder} is a folder")
    assert line.endswith("pass the path of a pipeline YAML file, e.g. one there: pipe.yaml")
    (folder / "empty").mkdir()
    line = refused(runner.invoke(app, ["tasks", "-c", "empty"]), "config file empty is a folder")
    assert line.endswith("; pass the path of a pipeline YAML file")
    assert not (folder / "runs").exists()


def test_a_dotted_task_name_is_refused_before_anything_starts(pipeline: Path) -> None:
    text = pipeline.read_text().replace("  b: {", "  glue.rte: {").replace("all}", "[a]}")
    pipeline.write_text(text)
    for command in ("tasks", "run"):  # `train` of it was a torch traceback
        line = refused(runner.invoke(app, [command, "-c", str(pipeline)]), "tasks: the task name")
        assert line.endswith(
            "has a '.', which cannot name its adapter, head and registered "
            "models ('.' separates their parts); rename it, e.g. glue-rte"
        )
    assert not (pipeline.parent / "runs").exists()


# ------------------------------------------------------------ bad data, a separate tasks file


@pytest.mark.parametrize(
    ("data", "words"),
    [
        ('{"sentence": ["a", "b"], "label": 0}', ("column 'sentence' (text_fields): holds a list",
                                                  "record 1 of")),
        ('{"sentence": 7, "label": 0}', ("holds a number (7), not text",)),
        ('{"sentence": "a", "label": 0}', ("all 2 training rows have the label '0'",)),
    ],
)  # fmt: skip
def test_bad_data_is_one_line_naming_the_row(
    pipeline: Path, data: str, words: tuple[str, ...]
) -> None:
    (pipeline.parent / "t.jsonl").write_text(f"{data}\n" + '{"sentence": "b", "label": 0}\n')
    result = runner.invoke(app, ["tasks", "-c", str(pipeline), "-o", "tasks.a.train=t.jsonl"])
    refused(result, "task 'a', train", *words)
    assert not (pipeline.parent / "runs").exists()


def test_a_nul_character_in_a_tasks_file_is_refused(pipeline: Path) -> None:
    tasks = pipeline.parent / "tasks.yaml"
    task = '{train: t.tsv, dev: t.tsv, text_fields: ["sentence\\0"], label_names: [0, 1]}'
    tasks.write_text(f"tasks:\n  a: {task}\n")  # YAML's "\0" is a NUL character
    text = pipeline.read_text().split("tasks:")[0].replace("data_root: .\n", "")
    pipeline.write_text(text + "tasks_file: tasks.yaml\nadapters: {reduction_factors: [16]}\n")
    line = refused(runner.invoke(app, ["tasks", "-c", str(pipeline)]), "holds a NUL character")
    assert f"tasks config {tasks}, tasks.a.text_fields[0]: 'sentence\\x00' holds" in line, line
    assert line.endswith("remove it")
    assert not (pipeline.parent / "runs").exists()


# ------------------------------------------------- read-only commands, and a store that is silent


@pytest.mark.parametrize(
    "command",
    [
        ["adapters"],
        ["pull", "a", "--to", "pulled"],
        ["predict", "a", "--input", "t.tsv", "--out", "p.jsonl"],
        ["report"],
        ["ui"],
    ],
)
def test_read_only_commands_never_create_a_store(pipeline: Path, command: list[str]) -> None:
    result = runner.invoke(app, [*command, "-c", str(pipeline)])
    refused(result, f"no tracking store at {pipeline.parent / 'runs' / 'mlflow.db'}", "run the")
    assert not (pipeline.parent / "runs").exists()


@pytest.mark.parametrize(
    "command",
    [
        ["status"],
        ["adapters"],
        ["pull", "demo_delivery", "--to", "pulled"],
        ["predict", "demo_sentiment", "--input", "t.tsv", "--out", "p.jsonl"],
        ["report"],
    ],
)
def test_read_only_commands_on_the_demo_config_write_no_demo_data(
    pipeline: Path, command: list[str]
) -> None:
    """`demo_tasks: true`: the suite is written when a task is first loaded, not when the
    config is (`adapterfleet tasks`, `run` and `demo` write it)."""
    demo = Path(__file__).resolve().parents[2] / "configs" / "demo.yaml"
    storage = pipeline.parent / "runs"
    result = runner.invoke(app, [*command, "-c", str(demo), "-o", f"storage={storage}"])
    assert result.exit_code in (0, 2), result.output
    assert "Traceback" not in result.output
    assert not storage.exists()


@pytest.mark.parametrize("command", [["run", "--resume"], ["sweep", "resume"]])
def test_resuming_what_never_started_is_refused_before_anything_is_written(
    pipeline: Path, command: list[str]
) -> None:
    """Nothing to resume is refused at once: no store, no Ray, no demo data (the demo config)."""
    demo = Path(__file__).resolve().parents[2] / "configs" / "demo.yaml"
    for config, storage in ((pipeline, "runs"), (demo, "demo-runs")):
        where = pipeline.parent / storage
        result = runner.invoke(app, [*command, "-c", str(config), "-o", f"storage={where}"])
        line = refused(result, "cannot resume the sweep", "no sweep was started there")
        assert line.endswith("are not trained again") and "without --resume" in line
        assert not where.exists()


def test_an_address_of_another_cluster_is_refused_where_ray_already_runs(
    pipeline: Path, ray_local: None
) -> None:
    """In a process already in Ray (a notebook's, the tests' own), `--address` of another
    cluster was ignored and the run trained on the Ray the process was in. It is refused,
    nothing written; the running cluster's own address, "auto" or none take that cluster."""
    import ray

    from adapterfleet.orchestration.sweep import check_same_cluster

    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        other = f"127.0.0.1:{listener.getsockname()[1]}"
    result = runner.invoke(app, ["run", str(pipeline), "--address", other])
    refused(result, f"ray address '{other}'", "already in Ray", "ray.shutdown() first")
    assert not (pipeline.parent / "runs").exists()
    for address in (None, "local", "auto", ray.get_runtime_context().gcs_address):
        check_same_cluster(address)


def test_num_cpus_that_cannot_apply_in_a_process_already_in_ray_is_said(ray_local: None) -> None:
    """A notebook's `run_pipeline(config, num_cpus=1)` after Ray started with 2 CPUs went on
    with 2 trials side by side, without a word that its num_cpus was dropped."""
    import ray

    from adapterfleet.orchestration.sweep import ensure_ray

    cpus = ray.cluster_resources()["CPU"]
    with pytest.warns(UserWarning, match=rf"num_cpus=1 is not applied: .* of {cpus:g} CPUs"):
        ensure_ray(None, 1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ensure_ray(None, int(cpus))  # what it has: nothing to say
        ensure_ray(None, None)


def test_python_callers_passing_a_path_or_a_str_for_a_list_get_one_line(
    pipeline: Path, tmp_path: Path
) -> None:
    """From Python: a path to `run_pipeline` was `AttributeError: 'str' object has no attribute
    'storage'`, a dict to `load_config` a pathlib TypeError, and a str of overrides was read a
    character at a time (`override 'a' must look like key.path=value`)."""
    from adapterfleet.config import ConfigError, load_config
    from adapterfleet.orchestration.pipeline import run_pipeline

    with pytest.raises(
        ConfigError, match=r"config: expected a PipelineConfig, got the str .*load_config\(path\)"
    ):
        run_pipeline(str(pipeline))  # type: ignore[arg-type]
    with pytest.raises(
        ConfigError, match=r"config: expected the path of a YAML file .*, got a dict"
    ):
        load_config({"name": "x"})  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"overrides: expected a list .* give \['name=x'\]"):
        load_config(pipeline, "name=x")
    assert not (pipeline.parent / "runs").exists()


@pytest.mark.parametrize(
    "command", [["adapters"], ["pull", "a", "--to", "pulled"], ["status"], ["report"], ["run"]]
)
def test_a_store_file_that_is_not_a_database_is_one_line(
    pipeline: Path, command: list[str]
) -> None:
    """It used to end in SQLAlchemy's traceback (`adapters`, `pull`); the file is left as is."""
    store = pipeline.parent / "runs" / "mlflow.db"
    store.parent.mkdir()
    store.write_text("not a database\n")
    result = runner.invoke(app, [*command, "-c", str(pipeline)])
    refused(result, f"{store} is not an SQLite database (file is not a database)", "point at")
    assert store.read_text() == "not a database\n"
    assert sorted(p.name for p in store.parent.iterdir()) == ["mlflow.db"]


@pytest.mark.parametrize("command", ["status", "report"])
def test_a_config_file_where_the_name_goes_is_the_config(pipeline: Path, command: str) -> None:
    """`run`, `tasks` and `clean` take the config file first; `status pipe.yaml` looked the
    file's name up as a pipeline in the default store: `no tracking store at .../adapterfleet-
    runs/mlflow.db: nothing was tracked there yet`, though the pipeline had run."""
    given = runner.invoke(app, [command, pipeline.name])  # as the user typed it, in its folder
    with_c = runner.invoke(app, [command, "-c", str(pipeline)])
    assert (given.exit_code, given.output) == (with_c.exit_code, with_c.output)
    assert "adapterfleet-runs" not in given.output
    refused(runner.invoke(app, [command, "nothere.yaml"]), "nothere.yaml")


def test_a_pipeline_named_without_its_config_finds_its_store_by_set(pipeline: Path) -> None:
    """`status NAME -o storage=...` (what the store errors suggest) used to be ignored: the
    default store was read and said to have no experiment, pointing at `adapterfleet jobs`."""
    from adapterfleet.registry import default_tracking_uri, ensure_experiment

    runs = pipeline.parent / "elsewhere"
    ensure_experiment(default_tracking_uri(runs), "p")
    found = runner.invoke(app, ["status", "p", "-o", f"storage={runs}"])
    assert found.exit_code == 0, found.output
    refused(
        runner.invoke(app, ["status", "q", "-o", f"storage={runs}"]),
        "no pipeline 'q' in sqlite:///",
        "(pipelines there: p); check the name, or point at its store",
    )
    refused(runner.invoke(app, ["status", "p"]), "no tracking store at", "-o storage=...")
    refused(
        runner.invoke(app, ["report", "p", "-o", "max_length=8"]),
        "-o max_length: without -c CONFIG only -o storage=... and -o tracking_uri=... apply",
    )
    refused(runner.invoke(app, ["status", "p", "--budget", "tiny"]), "--budget tiny: a budget")
    refused(runner.invoke(app, ["status", "p", "-o", "tracking_uri=5"]), "tracking_uri: expected")
    assert not (pipeline.parent / "adapterfleet-runs").exists()


def test_pull_of_a_task_the_config_lacks_lists_its_tasks(pipeline: Path) -> None:
    """It said the model had no alias 'best' (once a store existed) or that no store was there."""
    result = runner.invoke(app, ["pull", "ghost", "-c", str(pipeline), "--to", "x"])
    refused(result, "pull: 'ghost' is not a task of the config; tasks there: a, b")
    assert not (pipeline.parent / "x").exists() and not (pipeline.parent / "runs").exists()


def test_pull_with_both_an_alias_and_a_version_is_refused(pipeline: Path) -> None:
    """`--alias nope --version 1` pulled v1 and ignored the alias without a word."""
    args = ["pull", "a", "-c", str(pipeline), "--to", "x", "--alias", "nope", "--version", "1"]
    refused(
        runner.invoke(app, args),
        "pull: --alias nope and --version 1 each choose a version; give one of them (without "
        "either, --alias best)",
    )
    assert not (pipeline.parent / "x").exists() and not (pipeline.parent / "runs").exists()


def test_status_shows_the_plan_without_creating_a_store(pipeline: Path) -> None:
    result = runner.invoke(app, ["status", "-c", str(pipeline)])
    assert result.exit_code == 0, result.output
    assert "no runs yet" in result.output
    assert not (pipeline.parent / "runs").exists()


def test_status_of_a_config_names_the_store_it_did_not_find(
    pipeline: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A relative `storage: jobruns` read from another folder than the run's: `status -c` showed
    the plan all pending under `no runs yet (experiment not found)`, exit 0, as if the pipeline
    had never run, while `pull`, `report` and `status NAME` said `no tracking store at ...`.
    A pipeline not run yet has no store either, and its plan is still shown (documented): the
    line now names the store it looked for and how to point at another."""
    from adapterfleet.registry import default_tracking_uri, ensure_experiment

    ran, elsewhere = pipeline.parent / "ran", pipeline.parent / "elsewhere"
    ensure_experiment(default_tracking_uri(ran / "jobruns"), "another")  # no `p` there yet
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    command = ["status", "-c", str(pipeline), "-o", "storage=jobruns"]
    result = runner.invoke(app, command)
    assert result.exit_code == 0, result.output
    where = elsewhere / "jobruns" / "mlflow.db"
    assert result.output.splitlines()[1] == (
        f"no runs yet: no tracking store at {where}; run the pipeline, or point at the store "
        "it wrote (-o storage=DIR, --tracking-uri URI)"
    )
    assert "PEND" in result.output and not (elsewhere / "jobruns").exists()
    monkeypatch.chdir(ran)  # a store without the pipeline's experiment: not started yet
    result = runner.invoke(app, command)
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[1] == (  # its pipelines named: a wrong name shows
        "no runs yet (no experiment 'p' here; pipelines here: another)"
    )


@pytest.fixture
def silent_server() -> Iterator[str]:
    """A loopback port that accepts connections and never answers (a hung server)."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"


@pytest.mark.parametrize(
    "command",
    [["pull", "a", "--to", "pulled"], ["predict", "a", "--input", "t.tsv", "--out", "p.jsonl"]],
)
def test_a_silent_store_is_waited_on_with_a_word_and_a_bound(
    pipeline: Path, silent_server: str, command: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "3")
    started = time.monotonic()
    args = [*command, "-c", str(pipeline), "-o", f"tracking_uri={silent_server}"]
    result = runner.invoke(app, args)
    assert time.monotonic() - started < 15
    refused(result, f"tracking URI {silent_server}: no answer", "in 3 s", "start the server")
    assert f"waiting up to 2 s more for the tracking server {silent_server}" in result.output
    assert not (pipeline.parent / "pulled").exists() and not os.path.exists("p.jsonl")


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["run", "x.yaml", "--num-cpus", "many"], ("Invalid value for '--num-cpus'", "run --help")),
        (["train", "-c", "x.yaml"], ("Missing option '--task'", "train --help")),
        (["trian"], ("No such command 'trian'",)),
        (  # it sized nothing: a cluster's nodes say their own CPUs (it was ignored silently)
            ["run", "x.yaml", "--address", "10.0.0.1:6379", "--num-cpus", "8"],
            ("--num-cpus 8: sizes the local Ray a run starts, not the cluster at", "leave it out"),
        ),
        (
            ["sweep", "resume", "x.yaml", "--address", "auto", "--num-cpus", "2"],
            ("--num-cpus 2: ", "--address auto"),
        ),
    ],
)
def test_the_command_lines_own_mistakes_are_one_line_too(
    args: list[str], words: tuple[str, ...], capsys: pytest.CaptureFixture[str]
) -> None:
    from adapterfleet.cli.app import run_app

    assert run_app(args) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and err.startswith("error: "), err
    assert all(word in err for word in words), err
