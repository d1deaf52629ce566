"""The options every command shares, defined once, and the one way a command loads its config.

The pipeline config is `-c/--config CONFIG` in every command. `run`, `sweep resume` and `submit`
also take it as their first argument, the spelling they had first.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Annotated, TypeVar

import typer

from adapterfleet.config import ConfigError, PipelineConfig, load_config
from adapterfleet.console import Level
from adapterfleet.masking import masked_settings

N = TypeVar("N", bound=float | None)
CONFIG_HELP = "Pipeline YAML file."
ConfigOpt = Annotated[Path, typer.Option("--config", "-c", help=CONFIG_HELP)]
# `run CONFIG` / `-c CONFIG`: both spellings, for the commands that took a positional first.
ConfigArg = Annotated[
    Path | None,
    typer.Argument(
        metavar="CONFIG", help="Pipeline YAML file (or give it with -c).", show_default=False
    ),
]
MaybeConfigOpt = Annotated[Path | None, typer.Option("--config", "-c", help=CONFIG_HELP)]
SetOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--set",
        "-o",
        metavar="KEY=VALUE",
        help="Override any config key: key.path=value (repeatable).",
    ),
]
BudgetOpt = Annotated[
    str | None,
    typer.Option(help="A budget from the config's budgets: section (= --set budget=NAME)."),
]
# How predict reads its --input, beside --format and --header.
ColumnsOpt = Annotated[
    list[str] | None,
    typer.Option("--columns", metavar="NAME", help="Columns of a headerless tsv/csv (repeat)."),
]
IdFieldOpt = Annotated[
    str | None, typer.Option(help="Input column copied as `id` (default: id/idx/index/guid).")
]
QuotesOpt = Annotated[
    bool | None,
    typer.Option(
        "--quotes/--no-quotes",
        help='Whether a tsv/csv input\'s fields may be quoted ("...", as pandas writes them); '
        "default: as the task's file of that format, else a csv's are and a tsv's are not.",
        show_default=False,
    ),
]
EncodingOpt = Annotated[
    str | None,
    typer.Option(help="Text encoding of a tsv/csv/json input, e.g. latin-1 (default: UTF-8)."),
]
PredictWorkersOpt = Annotated[
    int | None, typer.Option("--workers", help="Ray actors (default: as many as resources allow).")
]
# The training settings a single run may change from the command line (train, fuse).
LrOpt = Annotated[float | None, typer.Option(help="Learning rate.")]
EpochsOpt = Annotated[int | None, typer.Option(help="Maximum epochs.")]
SeedOpt = Annotated[int | None, typer.Option(help="Random seed.")]
RayAddressOpt = Annotated[
    str | None,
    typer.Option("--address", help="Ray cluster to join ('auto', host:port); default: local."),
]
CpusOpt = Annotated[int | None, typer.Option(help="CPUs of the local Ray started for this run.")]
DashboardAddressOpt = Annotated[
    str | None,
    typer.Option(
        "--address",
        help="Ray dashboard address, e.g. http://HEAD:8265 "
        "(default: RAY_API_SERVER_ADDRESS / RAY_ADDRESS).",
    ),
]
VerboseOpt = Annotated[
    bool,
    typer.Option("--verbose", "-v", help="Also print what Ray, Tune and MLflow say themselves."),
]
QuietOpt = Annotated[
    bool, typer.Option("--quiet", "-q", help="Print only errors and the final summary.")
]
NameArg = Annotated[
    str | None,
    typer.Argument(help="Pipeline name (its MLflow experiment), or its config file (as -c)."),
]
TrackingUriOpt = Annotated[
    str | None,
    typer.Option(
        "--tracking-uri",
        help="With NAME: the store (default $MLFLOW_TRACKING_URI, else the embedded "
        "one, ./adapterfleet-runs/mlflow.db).",
    ),
]


def chosen_config(positional: Path | None, option: Path | None) -> Path:
    """The config of a command that takes it either way; both or neither is refused."""
    if positional is not None and option is not None and positional != option:
        raise ConfigError(f"config given twice ({positional} and -c {option}); give it once")
    chosen = positional or option
    if chosen is None:
        raise ConfigError("no config given; pass the pipeline YAML file with -c CONFIG")
    return chosen


def output_level(verbose: bool, quiet: bool) -> Level:
    """The `Level` of `--verbose` / `--quiet` (both is refused)."""
    if verbose and quiet:
        raise ConfigError("--verbose and --quiet contradict each other; give one")
    return Level.VERBOSE if verbose else Level.QUIET if quiet else Level.DEFAULT


def budget_overrides(budget: str | None, overrides: list[str] | None) -> list[str]:
    """`--budget NAME` as the override it stands for, before the command line's own."""
    if budget is not None and not budget.strip():
        raise ConfigError("--budget: empty; give the name of a budget in the config's budgets:")
    return [*([f"budget={budget}"] if budget else []), *(overrides or [])]


def config_command(verb: str, path: Path, overrides: list[str] | None, budget: str | None) -> str:
    """`adapterfleet VERB -c PATH` for the store a run wrote to (`ui` after `run`, `status`
    after `submit`): the budget and overrides go along, logins masked, since they may move it
    (storage=..., tracking_uri=...)."""
    items = masked_settings(budget_overrides(budget, overrides))
    options = [part for item in items for part in ("-o", item)]
    return shlex.join(["adapterfleet", verb, "-c", str(path), *options])


def load(path: Path, overrides: list[str] | None, budget: str | None = None) -> PipelineConfig:
    """The validated config of `path` with `--budget` and `--set` applied."""
    return load_config(path, budget_overrides(budget, overrides))


def checked_store(uri: str, *, read_only: bool, must_exist: bool = True) -> str:
    """`uri` once its tracking store answered (within seconds, saying what it waits for on
    stderr); a command that only reads (`read_only`) refuses a store that does not exist
    (unless not `must_exist`) rather than create an empty one."""
    from adapterfleet.registry.store import check_store

    say = lambda line: typer.echo(line, err=True)  # noqa: E731
    check_store(uri, read_only=read_only, must_exist=must_exist, say=say)
    return uri


def local_cpus(num_cpus: int | None, address: str | None) -> int | None:
    """`--num-cpus`, which sizes the local Ray a command starts: refused beside an `--address`
    of a cluster, whose nodes say their own CPUs (it was ignored without a word)."""
    at_least(num_cpus, 1, "--num-cpus")
    if num_cpus is not None and address not in (None, "local"):
        raise ConfigError(
            f"--num-cpus {num_cpus}: sizes the local Ray a run starts, not the cluster at "
            f"--address {address}, whose nodes give their own (ray start --num-cpus); leave it "
            "out, or set resources.cpu to size each trial"
        )
    return num_cpus


def at_least(value: N, minimum: float, option: str) -> N:
    """A numeric option's value (None: left out), refused below `minimum` naming the option."""
    if value is not None and value < minimum:
        kind = "an integer" if isinstance(minimum, int) else "a number"
        raise ConfigError(f"{option}: expected {kind} >= {minimum}, got {value}")
    return value


def writable_folder(path: Path, option: str) -> Path:
    """`path`, a folder a command writes (`--out`, `--to`), when it is one or can be made:
    a file in its way was a traceback (FileExistsError, NotADirectoryError) after the work."""
    from adapterfleet.registry.store import folder_problem

    if Path(path).expanduser().is_file():
        raise ConfigError(f"{option}: {path} is a file; give a folder to write into")
    problem = folder_problem(Path(path).expanduser().absolute())
    if problem:
        raise ConfigError(
            f"{option}: cannot write {path} ({problem}); give a folder that can be made there"
        )
    return path
