"""`adapterfleet run / sweep resume / pull / adapters / ui`: the pipeline and the registry."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from adapterfleet.cli.options import (
    BudgetOpt,
    ConfigArg,
    ConfigOpt,
    CpusOpt,
    MaybeConfigOpt,
    QuietOpt,
    RayAddressOpt,
    SetOpt,
    VerboseOpt,
    checked_store,
    chosen_config,
    config_command,
    load,
    local_cpus,
    output_level,
    writable_folder,
)
from adapterfleet.cli.output import metrics_table, resumable, table1
from adapterfleet.config import ConfigError
from adapterfleet.console import duration_text, progress_say
from adapterfleet.registry.tags import BEST_ALIAS

# What Ctrl-C leaves of a pipeline or sweep: every finished epoch is checkpointed and every
# registered version kept; the same command goes on from there (`run` resumes an interrupted
# sweep of the same settings, then fuses). Naming `sweep resume` too misled after the sweep: a
# fusion stopped mid-way is continued by `run`, not by it.
KEPT = (
    "finished epochs, trials and registered versions are kept; run the same command again "
    "to continue"
)

sweep_app = typer.Typer(help="Adapter sweeps.", no_args_is_help=True)


def run(
    config_arg: ConfigArg = None,
    resume: Annotated[bool, typer.Option("--resume", help="Continue an interrupted run.")] = False,
    address: RayAddressOpt = None,
    num_cpus: CpusOpt = None,
    budget: BudgetOpt = None,
    set_: SetOpt = None,
    config: MaybeConfigOpt = None,
    verbose: VerboseOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Run the pipeline: validate, prepare data, sweep adapters, register the best, fuse,
    train the baselines it declares. Prints a line per epoch of every trial, fusion and
    baseline, then the summary."""
    config = chosen_config(config_arg, config)
    level = output_level(verbose, quiet)
    local_cpus(num_cpus, address)
    cfg = load(config, set_, budget)  # a bad config is refused before torch and Ray load
    from adapterfleet.orchestration.pipeline import run_pipeline
    from adapterfleet.orchestration.summary import summary_columns, summary_rows

    with resumable(KEPT, cfg), progress_say(level, typer.echo, f"pipeline {cfg.name}") as say:
        summary = run_pipeline(
            cfg,
            resume=True if resume else None,
            ray_address=address,
            num_cpus=num_cpus,
            overrides=set_ or (),
            say=say,
            level=level,
        )
    rows = summary_rows(cfg, summary)
    metrics_table(rows, summary_columns(rows))
    if summary.report is not None:
        typer.echo()
        table1(summary.report)
        typer.echo(f"report: {summary.report.out_dir}")
    for where, error in summary.errors.items():
        typer.secho(f"error in {where}: {error}", err=True, fg=typer.colors.RED)
    ui = config_command("ui", config, set_, budget)
    typer.echo(f"wall time {duration_text(summary.seconds)}. See the runs: {ui}")
    if summary.errors:
        raise typer.Exit(1)


@sweep_app.command("resume")
def sweep_resume(
    config_arg: ConfigArg = None,
    address: RayAddressOpt = None,
    num_cpus: CpusOpt = None,
    budget: BudgetOpt = None,
    set_: SetOpt = None,
    config: MaybeConfigOpt = None,
    verbose: VerboseOpt = False,
    quiet: QuietOpt = False,
) -> None:
    """Continue the adapter sweep of CONFIG whose driver died; finished trials are not re-run."""
    level = output_level(verbose, quiet)
    local_cpus(num_cpus, address)
    cfg = load(chosen_config(config_arg, config), set_, budget)
    from adapterfleet.orchestration.sweep import resume_sweep

    with resumable(KEPT, cfg), progress_say(level, typer.echo, f"sweep {cfg.name}") as say:
        registered = resume_sweep(
            cfg, ray_address=address, num_cpus=num_cpus, progress=say, level=level
        )
    metrics_table(
        [{"task": t, "model": i.name, "version": f"v{i.version}"} for t, i in registered.items()]
    )
    if cfg.fusion.targets:  # `status` showed them `not started` after it, with no word of why
        targets = ", ".join(cfg.fusion.targets)
        again = config_command("run", chosen_config(config_arg, config), set_, budget)
        typer.echo(
            f"sweep resume trains the adapters only; to train the fusions ({targets}) too: {again}"
        )


def pull(
    task: Annotated[str, typer.Argument(help="Task whose registered adapter to download.")],
    to: Annotated[
        Path,
        typer.Option(
            "--to",
            help="Folder to write into: the adapter's files, head/ and pulled.json (a folder an "
            "earlier pull wrote is replaced).",
        ),
    ],
    config: ConfigOpt,
    alias: Annotated[
        str | None, typer.Option(help=f"Registry alias (default: {BEST_ALIAS}).")
    ] = None,
    version: Annotated[
        int | None, typer.Option(help="A version number instead of an alias.")
    ] = None,
    fusion: Annotated[
        bool,
        typer.Option(
            "--fusion",
            help="Pull the task's fusion: its weights, with its head and, under adapters/, the "
            "adapter versions it fuses.",
        ),
    ] = False,
    budget: BudgetOpt = None,
    set_: SetOpt = None,
) -> None:
    """Download a registered adapter (or fusion) with its head, each sha256-verified; evaluate
    --run, export and fuse --adapters take the folder."""
    from adapterfleet.results.models import check_pull_task, pull_registered, pulled_lines

    cfg = load(config, set_, budget)
    check_pull_task(cfg, task, alias=alias, version=version)
    writable_folder(to, "--to")
    checked_store(cfg.tracking_uri, read_only=True)
    pulled = pull_registered(cfg, task, to, fusion=fusion, alias=alias, version=version)
    for line in pulled_lines(pulled):
        typer.echo(line)


def adapters(
    config_arg: ConfigArg = None,
    config: MaybeConfigOpt = None,
    budget: BudgetOpt = None,
    set_: SetOpt = None,
    every: Annotated[
        bool, typer.Option("--all", help="Every version, not only those an alias names.")
    ] = False,
) -> None:
    """List the registered adapters and fusions of a pipeline with metric, version and alias:
    the best version of each (else the latest) and every version another alias names
    (pruned-k)."""
    from adapterfleet.results.models import registered_rows

    cfg = load(chosen_config(config_arg, config), set_, budget)
    checked_store(cfg.tracking_uri, read_only=True)
    rows = registered_rows(cfg, every=every)
    if not rows:  # "(nothing to show)" said nothing of where it looked
        from adapterfleet.registry.errors import safe_uri
        from adapterfleet.registry.status import experiment_names

        others = [n for n in experiment_names(cfg.tracking_uri) if n != cfg.name]
        there = f" (pipelines there: {', '.join(others)})" if others else ""
        typer.echo(f"nothing registered for {cfg.name} in {safe_uri(cfg.tracking_uri)} yet{there}")
        return
    metrics_table(rows)


def ui(
    config: ConfigOpt,
    port: Annotated[int, typer.Option(help="Port of the MLflow UI.")] = 5000,
    host: Annotated[str, typer.Option(help="Address to bind; loopback unless told.")] = "127.0.0.1",
    budget: BudgetOpt = None,
    set_: SetOpt = None,
) -> None:
    """Start the MLflow UI on the pipeline's tracking store (bound to 127.0.0.1 by default);
    print links to its runs and the model registry in MLflow's machine-learning view."""
    from adapterfleet.registry.ui import serve_ui

    if not 0 < port < 65536:
        raise ConfigError(f"--port: expected a port number in 1..65535, got {port}")
    cfg = load(config, set_, budget)
    checked_store(cfg.tracking_uri, read_only=True)
    raise typer.Exit(serve_ui(cfg.tracking_uri, cfg.name, host, port, say=typer.echo))


def clean(
    config_arg: ConfigArg = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Say what would be removed; remove nothing.")
    ] = False,
    tokens: Annotated[
        bool, typer.Option("--tokens", help="The token cache too (the next run tokenises again).")
    ] = False,
    budget: BudgetOpt = None,
    set_: SetOpt = None,
    config: MaybeConfigOpt = None,
) -> None:
    """Free the disk a pipeline's storage holds for nothing: Tune's experiments and trial
    folders of finished sweeps, work folders of registered fusions. Interrupted sweeps, the
    tracking store and registered versions are kept; refused while the pipeline runs."""
    cfg = load(chosen_config(config_arg, config), set_, budget)
    checked_store(cfg.tracking_uri, read_only=True, must_exist=False)
    from adapterfleet.orchestration.clean import clean_storage

    clean_storage(cfg, dry_run=dry_run, tokens=tokens, say=typer.echo)


def register(app: typer.Typer) -> None:
    app.command()(run)
    app.add_typer(sweep_app, name="sweep")
    app.command()(pull)
    app.command()(adapters)
    app.command()(ui)
    app.command()(clean)
