"""The options every command shares: one spelling of the config, the grouped help, --version."""

from __future__ import annotations

from importlib.metadata import version
from pathlib import Path

import pytest
from typer.testing import CliRunner

from adapterfleet.cli.app import PANELS, app

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
runner = CliRunner()


def test_version_is_the_installed_package_version() -> None:
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.output.strip() == f"adapterfleet {version('adapterfleet')}"


def test_help_lists_every_command_once_in_its_panel() -> None:
    result = runner.invoke(app, ["--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    listed = [n for names in PANELS.values() for n in names]
    assert len(listed) == len(set(listed))
    registered = {
        info.name or info.callback.__name__.replace("_", "-") for info in app.registered_commands
    } | {g.name for g in app.registered_groups}
    assert registered == set(listed)
    positions = [result.output.index(f"─ {panel} ") for panel in PANELS]
    assert positions == sorted(positions)


def test_help_gives_each_command_its_summary_as_one_unbroken_paragraph() -> None:
    """The command list carries each docstring's first paragraph with its line breaks gone:
    a wide terminal shows every sentence whole (rich would cut them at the source's width)."""
    import inspect

    result = runner.invoke(app, ["--help"], env={"COLUMNS": "1000"})
    assert result.exit_code == 0
    commands = [info for info in app.registered_commands if info.callback]
    for info in commands:
        first = inspect.getdoc(info.callback).split("\n\n")[0]
        assert " ".join(first.split()) in result.output, first
    assert sum("\n" in inspect.getdoc(i.callback).split("\n\n")[0] for i in commands) >= 3


def test_a_commands_help_shows_each_paragraph_unbroken() -> None:
    """A command's own --help kept its docstring's line breaks past the first paragraph
    (`fuse --help` broke "over the registered" from "`best` adapters" at any width)."""
    result = runner.invoke(app, ["fuse", "--help"], env={"COLUMNS": "1000"})
    assert result.exit_code == 0
    paragraph = (
        "With --adapters: over those saved folders, written to --out. With --wait: over the "
        "registered `best` adapters of the config's fusion target"
    )
    assert paragraph in result.output
    shown = runner.invoke(app, ["train", "--help"], env={"COLUMNS": "1000"}).output
    assert "Options left out train as the pipeline does: st-a (adapters.architecture) and" in shown


@pytest.mark.parametrize(
    "command", [["run"], ["sweep", "resume"], ["submit"], ["tasks"], ["adapters"]]
)
def test_positional_and_option_config_are_one_argument(command: list[str], tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.yaml"
    for spelling in ([str(missing)], ["-c", str(missing)]):
        result = runner.invoke(app, [*command, *spelling])
        assert result.exit_code == 2, result.output
        assert result.output.startswith("error: config ") and str(missing) in result.output
    twice = runner.invoke(app, [*command, str(missing), "-c", str(tmp_path / "other.yaml")])
    assert twice.exit_code == 2
    assert "config given twice" in twice.output
    neither = runner.invoke(app, command)
    assert neither.exit_code == 2
    assert "no config given; pass the pipeline YAML file with -c CONFIG" in neither.output


def test_tasks_loads_the_config_with_c_and_set(tmp_path: Path) -> None:
    result = runner.invoke(
        app,
        ["tasks", "-c", str(CONFIGS / "demo.yaml"), "-o", f"storage={tmp_path / 'runs'}"],
        env={"COLUMNS": "200"},
    )
    assert result.exit_code == 0, result.output
    rows = [line for line in result.output.splitlines() if line.startswith("| demo_")]
    assert [row.split("|")[1].strip() for row in rows] == [
        "demo_sentiment",
        "demo_aspect",
        "demo_negation",
        "demo_delivery",
    ]
    assert (tmp_path / "runs" / "demo-data" / "tasks.yaml").is_file()


@pytest.mark.parametrize(
    ("override", "refusal"),
    [
        ("adapters.reduction_factors=[7]", "reduction_factor 7 does not divide the hidden size"),
        ("max_length=100000", "max_length: 100000 is more than the 512 positions"),
        ("base_model=./no-such-model", "base_model: ./no-such-model is not a folder"),
    ],
)
def test_tasks_refuses_what_run_refuses_before_ray(
    tmp_path: Path, override: str, refusal: str
) -> None:
    """`tasks` is the newcomer's "check my config": it loaded the data and said nothing of a
    base model, reduction factor or max_length that `run` then refused."""
    storage = f"storage={tmp_path / 'runs'}"
    result = runner.invoke(app, ["tasks", "-c", "demo", "-o", storage, "-o", override])
    assert result.exit_code == 2, result.output
    assert refusal in result.output
    assert not (tmp_path / "runs" / "demo-data").exists()  # refused before the data is written


def test_tasks_says_a_fusion_of_one_adapter_is_no_mix(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A fusion target over one adapter trained and registered without a word; its fusion
    weight is always 1. Said, not refused: the other targets of the demo are left alone."""
    storage = f"storage={tmp_path / 'runs'}"
    one = "fusion.targets={demo_delivery: [demo_delivery]}"
    result = runner.invoke(app, ["tasks", "-c", "demo", "-o", storage, "-o", one])
    assert result.exit_code == 0, result.output
    assert (
        "fusion.targets.demo_delivery fuses one adapter (demo_delivery): its fusion weight is "
        "always 1, so the fusion learns no mix, only its value projection and head; list two "
        "or more adapter tasks (AdapterFusion composes several)"
    ) in caplog.messages  # on stderr outside pytest, which takes the warnings itself
    caplog.clear()
    plain = runner.invoke(app, ["tasks", "-c", "demo", "-o", storage])
    assert plain.exit_code == 0 and not any("fuses one" in m for m in caplog.messages)


def test_every_command_that_reads_a_config_takes_its_budget() -> None:
    """After `run CONFIG --budget cpu`, the same `--budget cpu` finds that run with every other
    command (`adapters`, `pull`, `predict` used to know only `-o budget=cpu`)."""
    import typer.main

    group = typer.main.get_command(app)
    missing = []
    for name, command in group.commands.items():
        commands = command.commands if hasattr(command, "commands") else {name: command}
        for sub, leaf in commands.items():
            options = {o for p in leaf.params for o in getattr(p, "opts", [])}
            if "--config" in options and "--budget" not in options:
                missing.append(sub)
    assert missing == []


def test_tasks_takes_a_budget(tmp_path: Path) -> None:
    config = CONFIGS / "glue-fusion.yaml"
    storage = f"storage={tmp_path / 'runs'}"
    result = runner.invoke(app, ["tasks", "-c", str(config), "--budget", "nope", "-o", storage])
    assert result.exit_code == 2
    assert "budget: 'nope' is not declared in budgets; declared: full, cpu, tiny" in result.output
    empty = runner.invoke(app, ["tasks", "-c", str(config), "--budget", "", "-o", storage])
    assert empty.exit_code == 2  # it was ignored: the config ran on its own settings
    assert "--budget: empty; give the name of a budget in the config's budgets:" in empty.output


def _command_paths(command, path=()):
    yield path
    for name, sub in (getattr(command, "commands", None) or {}).items():
        yield from _command_paths(sub, (*path, name))


def test_no_help_shows_a_type_for_a_flag_and_every_option_with_a_value_keeps_one(
    capsys, monkeypatch
) -> None:
    """This Typer printed `<bool>` beside every flag (`--resume <bool>`, `--help <bool>`), which
    reads as a value to give; `--set` read `<list[str]>`. Every command's help, as `adapterfleet
    ... --help` prints it."""
    import typer

    from adapterfleet.cli.app import run_app

    monkeypatch.setenv("COLUMNS", "200")
    paths = list(_command_paths(typer.main.get_command(app)))
    assert ("run",) in paths and ("sweep", "resume") in paths and len(paths) > 15
    for path in paths:
        assert run_app([*path, "--help"]) == 0
        shown = capsys.readouterr().out
        assert "--help " in shown and "<bool>" not in shown, (path, shown)
        assert "list[" not in shown, (path, shown)
    run_app(["run", "--help"])
    rows = {line.split()[1]: line for line in capsys.readouterr().out.splitlines() if "--" in line}
    assert "<int>" in rows["--num-cpus"] and "<str>" in rows["--address"]
    assert "KEY=VALUE" in rows["--set"]
    assert rows["--resume"].split()[2] == "Continue"  # the help right after the flag's name
