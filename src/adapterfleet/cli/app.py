"""The `adapterfleet` command: parses arguments, loads the config, calls one function below and
prints; no logic. Each command imports what it calls when it runs, so `--help` loads no torch."""

from __future__ import annotations

import inspect
import os
import shlex
import sys
from importlib.metadata import version as package_version
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from adapterfleet.cli import cluster, interop, pipeline, prune, report
from adapterfleet.cli.ending import exit_promptly
from adapterfleet.cli.help_text import EXIT_STATUS, plain_flags
from adapterfleet.cli.options import (
    BudgetOpt,
    ColumnsOpt,
    ConfigArg,
    ConfigOpt,
    EncodingOpt,
    EpochsOpt,
    IdFieldOpt,
    LrOpt,
    MaybeConfigOpt,
    PredictWorkersOpt,
    QuietOpt,
    QuotesOpt,
    SeedOpt,
    SetOpt,
    VerboseOpt,
    at_least,
    checked_store,
    chosen_config,
    load,
)
from adapterfleet.cli.output import (
    metrics_table,
    resumable,
    resumable_run,
    run_report,
    show_our_warnings_as_lines,
    usage_line,
    wrap_commands,
)
from adapterfleet.config import ConfigError
from adapterfleet.registry.descriptions import COMMAND_ENV
from adapterfleet.registry.tags import BEST_ALIAS

if TYPE_CHECKING:
    from adapterfleet.training import EpochLog

app = typer.Typer(
    name="adapterfleet",
    epilog=EXIT_STATUS,  # the help itself is the callback's docstring
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)

DEMO_CONFIG = Path("demo")  # shipped with adapterfleet: config.document.config_file
BaseModelOpt = Annotated[
    str | None, typer.Option(help="Base model to fuse on (e.g. an MT-A run's model/).")
]


@app.command()
def tasks(
    config_arg: ConfigArg = None,
    config: MaybeConfigOpt = None,
    budget: BudgetOpt = None,
    set_: SetOpt = None,
) -> None:
    """Check a config as `run` does before Ray starts (base model, reduction factors,
    max_length, storage, every task's data); show each task's splits, labels and metric."""
    cfg = load(chosen_config(config_arg, config), set_, budget)  # refused before torch loads
    from adapterfleet.orchestration.commands import task_summaries

    metrics_table(task_summaries(cfg))


@app.command()
def train(
    config: ConfigOpt,
    task: Annotated[str, typer.Option(help="Task name from the config.")],
    out: Annotated[Path, typer.Option(help="Run folder to write.")],
    mode: Annotated[str, typer.Option(help="head, full, st-a, st-a-houlsby or mt-a.")] = "st-a",
    reduction_factor: Annotated[int | None, typer.Option(help="Adapter reduction factor.")] = None,
    lr: LrOpt = None,
    epochs: EpochsOpt = None,
    batch_size: Annotated[int | None, typer.Option(help="Training batch size.")] = None,
    seed: SeedOpt = None,
    budget: BudgetOpt = None,
    set_: SetOpt = None,
) -> None:
    """Train one task in one mode (a row of the paper's Table 1) on this machine.

    Options left out train as the pipeline does: st-a (adapters.architecture) and st-a-houlsby
    the task grid's first reduction factor and learning rate, baselines.systems the baselines'."""
    cfg = load(config, set_, budget)
    from adapterfleet.orchestration.local import adapter_training, train_task

    training = adapter_training(
        cfg,
        task,
        mode,
        learning_rate=lr,
        max_epochs=epochs,
        batch_size=batch_size,
        seed=seed,
        progress=sys.stderr.isatty(),
    )
    with resumable_run(out) as say:
        run = train_task(
            cfg,
            task,
            mode,
            out,
            reduction_factor=reduction_factor,
            train_config=training,
            callbacks=[_epoch_log(training.max_epochs)],
            say=say,
        )
    run_report(run, training)


@app.command()
def fuse(
    config: ConfigOpt,
    target: Annotated[str, typer.Option(help="Target task name from the config.")],
    adapters: Annotated[
        list[Path] | None,
        typer.Option("--adapters", metavar="FOLDER", help="Adapter folders (repeat)."),
    ] = None,
    out: Annotated[Path | None, typer.Option(help="Run folder to write.")] = None,
    wait: Annotated[
        bool, typer.Option("--wait", help="Take the adapters from the registry, waiting for them.")
    ] = False,
    timeout: Annotated[float, typer.Option(help="Seconds to wait for adapters.")] = 24 * 3600,
    lr: LrOpt = None,
    epochs: EpochsOpt = None,
    seed: SeedOpt = None,
    base_model: BaseModelOpt = None,
    budget: BudgetOpt = None,
    set_: SetOpt = None,
) -> None:
    """Train an AdapterFusion layer for the --target task (base and adapters frozen).

    With --adapters: over those saved folders, written to --out. With --wait: over the registered
    `best` adapters of the config's fusion target, waiting until they all exist, then registered.
    """
    cfg = load(config, set_, budget)
    from adapterfleet.orchestration.commands import fuse_registered, fusion_training
    from adapterfleet.orchestration.local import fuse_task
    from adapterfleet.results.formats import version_label

    changes = {"learning_rate": lr, "max_epochs": epochs, "seed": seed}
    progress = sys.stderr.isatty()
    if wait:
        at_least(timeout, 0.0, "--timeout")
        checked_store(cfg.tracking_uri, read_only=False)
        outcome = fuse_registered(
            cfg,
            target,
            timeout_s=timeout,
            say=typer.echo,
            config_path=config,
            progress=progress,
            **changes,
        )
        version = version_label(outcome.version.version, outcome.version.aliases)
        metrics_table([{"target": target, "version": version, **outcome.dev_metrics}])
        return
    if not adapters or out is None:
        raise ConfigError("fuse: give --adapters DIR... and --out DIR, or --wait (registry)")
    training = fusion_training(cfg, target, progress=progress, **changes)
    with resumable_run(out) as say:
        fused = fuse_task(
            cfg, target, adapters, out, train_config=training, base_model=base_model,
            callbacks=[_epoch_log(training.max_epochs)], say=say,
        )  # fmt: skip
    run_report(fused, training)


@app.command()
def evaluate(
    config: ConfigOpt,
    task: Annotated[str, typer.Option(help="Task whose dev split to evaluate on.")],
    run: Annotated[Path, typer.Option(help="A run folder written by train (any mode) or fuse.")],
    budget: BudgetOpt = None,
    set_: SetOpt = None,
) -> None:
    """Evaluate a saved run folder (adapter, fusion or MT-A, with its head) on a task's dev split,
    on the base it trained on."""
    cfg = load(config, set_, budget)
    from adapterfleet.orchestration.local import evaluate_run

    metrics = evaluate_run(cfg, task, run, overrides=set_ or ())
    metrics_table([{"task": task, **metrics}])


@app.command()
def predict(
    target: Annotated[str, typer.Argument(help="Task whose registered model predicts.")],
    config: ConfigOpt,
    input_: Annotated[
        Path, typer.Option("--input", help="Rows: tsv, csv, jsonl, json, parquet; - for stdin.")
    ],
    out: Annotated[
        Path, typer.Option(help="Predictions: .jsonl, .csv, .tsv, .parquet; - for JSON lines out.")
    ],
    adapter: Annotated[
        bool, typer.Option("--adapter", help="Use the task's registered adapter, not its fusion.")
    ] = False,
    alias: Annotated[str, typer.Option(help="Registry alias of the version.")] = BEST_ALIAS,
    version: Annotated[int | None, typer.Option(help="Version number, not --alias.")] = None,
    input_format: Annotated[
        str | None, typer.Option("--format", help="Input format when its suffix does not say.")
    ] = None,
    header: Annotated[bool, typer.Option(help="Whether a tsv/csv input has a header.")] = True,
    columns: ColumnsOpt = None,
    quotes: QuotesOpt = None,
    encoding: EncodingOpt = None,
    id_field: IdFieldOpt = None,
    batch_size: Annotated[int | None, typer.Option(help="Rows per batch.")] = None,
    use_ray: Annotated[bool, typer.Option("--ray", help="Run on Ray Data.")] = False,
    workers: PredictWorkersOpt = None,
    budget: BudgetOpt = None,
    set_: SetOpt = None,
) -> None:
    """Predict every row of --input with TARGET's registered fusion (or --adapter) and its head;
    write the predicted label and a probability per label (a regression task: the predicted
    number), one row per input row, in order."""
    cfg = load(config, set_, budget)
    from adapterfleet.orchestration.predict import predict_file

    at_least(batch_size, 1, "--batch-size")
    at_least(workers, 1, "--workers")
    with resumable(_kept_by_predict(out)):
        predict_file(
            cfg,
            target,
            input_,
            out,
            adapter=adapter,
            alias=alias,
            version=version,
            input_format=input_format,
            header=header,
            columns=columns,
            quotes=quotes,
            encoding=encoding,
            id_field=id_field,
            batch_size=batch_size,
            use_ray=use_ray,
            workers=workers,
            config_path=config,
            show_progress=sys.stderr.isatty(),
            say=lambda line: typer.echo(line, err=True),
        )


def _kept_by_predict(out: Path) -> str:
    """What a predict stopped by Ctrl-C or SIGTERM leaves: the file at --out as it was."""
    if str(out) == "-":
        return "the rows on standard output are not all of them; run it again"
    return f"nothing was written to {out} (a file there is as it was); run it again"


@app.command()
def demo(
    config: ConfigOpt = DEMO_CONFIG,
    num_cpus: Annotated[int | None, typer.Option(help="CPUs of the local Ray.")] = None,
    budget: BudgetOpt = None,
    set_: SetOpt = None,
    verbose: VerboseOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """The embedded default: the whole pipeline on a generated task suite, local Ray, SQLite
    MLflow and the packaged MiniLM; adapters in parallel, then the fusion, then a summary."""
    from adapterfleet.cli.pipeline import run

    run(
        config=config,
        resume=False,
        address=None,
        num_cpus=num_cpus,
        budget=budget,
        set_=set_,
        verbose=verbose,
        quiet=quiet,
    )


def _epoch_log(max_epochs: int) -> EpochLog:
    """A line per epoch on stderr, so a run's progress shows in a log file too."""
    from adapterfleet.training import EpochLog

    return EpochLog(lambda line: typer.echo(line, err=True), max_epochs)


pipeline.register(app)
cluster.register(app)
interop.register(app)
prune.register(app)
report.register(app)

# `--help` lists the commands in these groups, in this order.
PANELS = {
    "Pipeline": ("demo", "run", "sweep", "status", "report", "tasks"),
    "Single runs": ("train", "fuse", "evaluate", "predict", "prune"),
    "Registry": ("adapters", "pull", "ui", "clean"),
    "Cluster": ("submit", "jobs", "logs", "stop"),
    "Interop": ("import-adapter", "export"),
}


def _command_name(info: typer.models.CommandInfo | typer.models.TyperInfo) -> str:
    if info.name:
        return info.name
    callback = info.callback if isinstance(info, typer.models.CommandInfo) else None
    return callback.__name__.replace("_", "-") if callback else ""


def _reflowed(info: typer.models.CommandInfo) -> str | None:
    """A command's docstring with each paragraph on one line (rich keeps a docstring's line
    breaks, which cut its sentences at the source's width); the first is `--help`'s entry."""
    doc = inspect.getdoc(info.callback) if info.callback else None
    return "\n\n".join(" ".join(part.split()) for part in doc.split("\n\n")) if doc else None


def _group_commands() -> None:
    panel_of = {name: panel for panel, names in PANELS.items() for name in names}
    entries = [*app.registered_commands, *app.registered_groups]
    for info in entries:
        info.rich_help_panel = panel_of[_command_name(info)]
    groups = [group.typer_instance for group in app.registered_groups if group.typer_instance]
    for command in [*app.registered_commands, *(c for g in groups for c in g.registered_commands)]:
        text = _reflowed(command)
        command.help = command.help or text
        command.short_help = command.short_help or (text.split("\n\n")[0] if text else None)
    order = {name: i for i, name in enumerate(n for names in PANELS.values() for n in names)}
    app.registered_commands.sort(key=lambda info: order[_command_name(info)])


def _version(value: bool) -> None:
    if value:
        typer.echo(f"adapterfleet {package_version('adapterfleet')}")
        raise typer.Exit()


@app.callback()
def _options(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Show the version."),
    ] = False,
) -> None:
    """Train fleets of bottleneck adapters and compose them with AdapterFusion."""


_group_commands()
wrap_commands(app)  # the CLI boundary: every command's UserError is one line, its exit_code


def main() -> None:
    # the command line, for the descriptions of what it writes to MLflow (inherited by local Ray)
    os.environ[COMMAND_ENV] = shlex.join(["adapterfleet", *sys.argv[1:]])
    # every command starts or joins Ray itself (`ensure_ray`): a Ray call from a thread after
    # Ctrl-C has left Ray fails, rather than starting a new local Ray (read when Ray is imported)
    os.environ.setdefault("RAY_ENABLE_AUTO_CONNECT", "0")
    show_our_warnings_as_lines()
    exit_promptly(run_app())


def run_app(args: list[str] | None = None) -> int:
    """The app, with the command line's own mistakes (an option missing, a value that is not a
    number) as one `error:` line too, exit status 2, instead of Typer's usage box."""
    try:
        code = plain_flags(typer.main.get_command(app))(args=args, standalone_mode=False)
    except typer.TyperException as error:  # Typer's usage errors (its own click's)
        if type(error).__name__ == "NoArgsIsHelpError":
            error.show()  # type: ignore[attr-defined]  # no arguments: the help
            return int(getattr(error, "exit_code", 2))
        context = getattr(error, "ctx", None)
        hint = f"; see {context.command_path} --help" if context is not None else ""
        format_message = getattr(error, "format_message", None)
        message = (format_message() if format_message else str(error)).rstrip(".")
        typer.secho(f"error: {usage_line(message)}{hint}", err=True, fg="red")
        return int(getattr(error, "exit_code", 2))
    except typer.Abort:
        typer.echo("Aborted.", err=True)
        return 1
    return code if isinstance(code, int) else 0


if __name__ == "__main__":
    main()
