"""`adapterfleet run / sweep resume / pull / adapters / ui`: the pipeline and the registry."""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path
from typing import Annotated

import typer

from adapterfleet.cli.output import fail_cleanly, metrics_table

ConfigArg = Annotated[Path, typer.Argument(help="Pipeline YAML file.")]
SetOpt = Annotated[
    list[str] | None,
    typer.Option("--set", "-o", help="Override any config key: key.path=value (repeatable)."),
]
AddressOpt = Annotated[
    str | None,
    typer.Option("--address", help="Ray cluster to join ('auto', host:port); default: local."),
]
CpusOpt = Annotated[int | None, typer.Option(help="CPUs of the local Ray started for this run.")]
BudgetOpt = Annotated[
    str | None,
    typer.Option(help="A budget from the config's budgets: section (= --set budget=NAME)."),
]
sweep_app = typer.Typer(help="Adapter sweeps.", no_args_is_help=True)


def _config(path: Path, overrides: list[str] | None, budget: str | None = None):  # noqa: ANN202
    from adapterfleet.config import load_config

    chosen = [f"budget={budget}"] if budget else []
    return load_config(path, [*chosen, *(overrides or [])])


def _ui_command(path: Path, overrides: list[str] | None, budget: str | None) -> str:
    """`adapterfleet ui` for the store this run wrote to: the budget and overrides go along,
    since they may move it (storage=..., tracking_uri=...)."""
    chosen = [f"budget={budget}"] if budget else []
    options = [part for item in [*chosen, *(overrides or [])] for part in ("-o", item)]
    return shlex.join(["adapterfleet", "ui", "-c", str(path), *options])


@fail_cleanly
def run(
    config: ConfigArg,
    resume: Annotated[bool, typer.Option("--resume", help="Continue an interrupted run.")] = False,
    address: AddressOpt = None,
    num_cpus: CpusOpt = None,
    budget: BudgetOpt = None,
    set_: SetOpt = None,
) -> None:
    """Run the pipeline: validate, prepare data, sweep adapters, register the best, fuse,
    train the baselines it declares."""
    from adapterfleet.orchestration.pipeline import run_pipeline, summary_rows

    cfg = _config(config, set_, budget)
    summary = run_pipeline(
        cfg,
        resume=True if resume else None,
        ray_address=address,
        num_cpus=num_cpus,
        overrides=set_ or (),
        say=typer.echo,
    )
    metrics_table(summary_rows(cfg, summary))
    if summary.report is not None:
        typer.echo(f"\n{summary.report.table}\nreport: {summary.report.out_dir}")
    for where, error in summary.errors.items():
        typer.secho(f"error in {where}: {error}", err=True, fg=typer.colors.RED)
    typer.echo(f"{summary.seconds:.0f}s. See the runs: {_ui_command(config, set_, budget)}")
    if summary.errors:
        raise typer.Exit(1)


@sweep_app.command("resume")
@fail_cleanly
def sweep_resume(
    config: ConfigArg,
    address: AddressOpt = None,
    num_cpus: CpusOpt = None,
    budget: BudgetOpt = None,
    set_: SetOpt = None,
) -> None:
    """Continue the adapter sweep of CONFIG whose driver died; finished trials are not re-run."""
    from adapterfleet.orchestration.sweep import resume_sweep

    cfg = _config(config, set_, budget)
    registered = resume_sweep(cfg, ray_address=address, num_cpus=num_cpus, progress=typer.echo)
    metrics_table(
        [{"task": t, "model": i.name, "version": i.version} for t, i in registered.items()]
    )


@fail_cleanly
def pull(
    task: Annotated[str, typer.Argument(help="Task whose registered adapter to download.")],
    to: Annotated[Path, typer.Option("--to", help="Folder to write the adapter into.")],
    config: Annotated[Path, typer.Option("--config", "-c", help="Pipeline YAML file.")],
    alias: Annotated[str, typer.Option(help="Registry alias.")] = "best",
    version: Annotated[
        int | None, typer.Option(help="A version number instead of the alias.")
    ] = None,
    fusion: Annotated[bool, typer.Option("--fusion", help="Pull the task's fusion.")] = False,
    set_: SetOpt = None,
) -> None:
    """Download a registered adapter (or fusion) and verify its sha256."""
    from adapterfleet.orchestration.sweep import tracking_uri_of
    from adapterfleet.registry import adapter_model_name, fusion_model_name
    from adapterfleet.registry import pull as pull_version

    cfg = _config(config, set_)
    name = (fusion_model_name if fusion else adapter_model_name)(cfg.registry_prefix, task)
    dest = pull_version(
        tracking_uri_of(cfg), name, to, alias=None if version else alias, version=version
    )
    typer.echo(f"{name} -> {dest} (sha256 verified)")


@fail_cleanly
def adapters(
    config: Annotated[Path, typer.Option("--config", "-c", help="Pipeline YAML file.")],
    set_: SetOpt = None,
) -> None:
    """List the registered adapters and fusions of a pipeline with metric, version and alias."""
    from adapterfleet.orchestration.sweep import tracking_uri_of
    from adapterfleet.registry import list_models

    cfg = _config(config, set_)
    uri = tracking_uri_of(cfg)
    rows = []
    for kind in ("adapter", "fusion"):
        for info in list_models(uri, cfg.registry_prefix, kind):
            rows.append(
                {
                    "kind": kind,
                    "task": info.task,
                    "model": info.name,
                    "version": info.version,
                    "aliases": ",".join(info.aliases),
                    "metric": info.tags.get("metric", ""),
                    "value": info.tags.get(
                        "metric_value", info.tags.get(f"dev_{info.tags.get('metric')}", "")
                    ),
                    "rf": info.tags.get("reduction_factor", ""),
                    "lr": info.tags.get("learning_rate", ""),
                }
            )
    metrics_table(rows)


@fail_cleanly
def ui(
    config: Annotated[Path, typer.Option("--config", "-c", help="Pipeline YAML file.")],
    port: Annotated[int, typer.Option(help="Port of the MLflow UI.")] = 5000,
    host: Annotated[str, typer.Option(help="Address to bind; loopback unless told.")] = "127.0.0.1",
    set_: SetOpt = None,
) -> None:
    """Start the MLflow UI on the pipeline's tracking store (bound to 127.0.0.1 by default)."""
    from adapterfleet.orchestration.sweep import tracking_uri_of

    uri = tracking_uri_of(_config(config, set_))
    if uri.startswith("http"):
        typer.echo(f"the tracking store is a server already: open {uri}")
        return
    typer.echo(f"MLflow UI on http://{host}:{port} for {uri} (Ctrl-C stops it)")
    env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    subprocess.run(
        ["mlflow", "ui", "--backend-store-uri", uri, "--host", host, "--port", str(port)],
        env=env,
        check=False,
    )


def register(app: typer.Typer) -> None:
    app.command()(run)
    app.add_typer(sweep_app, name="sweep")
    app.command()(pull)
    app.command()(adapters)
    app.command()(ui)
