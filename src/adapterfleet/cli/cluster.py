"""`adapterfleet submit / status / logs / stop`: the pipeline as a Ray job on a cluster."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from adapterfleet.cli.output import fail_cleanly, metrics_table

AddressOpt = Annotated[
    str | None,
    typer.Option(
        "--address",
        help="Ray dashboard address, e.g. http://HEAD:8265 "
        "(default: RAY_API_SERVER_ADDRESS / RAY_ADDRESS).",
    ),
]


@fail_cleanly
def submit(
    config: Annotated[Path, typer.Argument(help="Pipeline YAML file (inside the working dir).")],
    address: AddressOpt = None,
    working_dir: Annotated[Path, typer.Option(help="Folder uploaded for the job.")] = Path("."),
    set_: Annotated[list[str] | None, typer.Option("--set", "-o", help="key.path=value")] = None,
    wait: Annotated[bool, typer.Option("--wait", help="Wait for the job to end.")] = False,
) -> None:
    """Submit the pipeline to a Ray cluster through the Jobs API (token auth from RAY_AUTH_TOKEN,
    RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token)."""
    from adapterfleet.orchestration.jobs import submit_pipeline

    job_id = submit_pipeline(config, address, set_ or (), working_dir=working_dir, wait=wait)
    typer.echo(
        f"submitted {job_id}\n  follow it: adapterfleet logs {job_id} --follow"
        f"\n  progress:  adapterfleet status -c {config}"
    )


@fail_cleanly
def status(
    name: Annotated[
        str | None, typer.Argument(help="Pipeline name (its MLflow experiment); or use -c.")
    ] = None,
    config: Annotated[
        Path | None, typer.Option("--config", "-c", help="Pipeline YAML file.")
    ] = None,
    tracking_uri: Annotated[
        str | None,
        typer.Option(
            "--tracking-uri",
            help="With NAME: the store (default $MLFLOW_TRACKING_URI, else the embedded "
            "one, ./adapterfleet-runs/mlflow.db).",
        ),
    ] = None,
    set_: Annotated[list[str] | None, typer.Option("--set", "-o", help="key.path=value")] = None,
) -> None:
    """Tasks, trials done/running/failed, registered versions and fusion state of a pipeline."""
    from adapterfleet.orchestration.status import pipeline_status, status_by_name
    from adapterfleet.orchestration.sweep import tracking_uri_of

    if config is not None:
        from adapterfleet.config import load_config

        cfg = load_config(config, set_ or [])
        if name is not None and name != cfg.name:
            raise typer.BadParameter(f"{name!r} is not the name of {config} ({cfg.name!r})")
        typer.echo(pipeline_status(cfg, tracking_uri or tracking_uri_of(cfg)).render())
        return
    if name is None:
        raise typer.BadParameter("give the pipeline NAME or its config with -c CONFIG")
    typer.echo(status_by_name(name, tracking_uri or _default_uri()).render())


def _default_uri() -> str:
    import os

    from adapterfleet.registry import default_tracking_uri

    return os.environ.get("MLFLOW_TRACKING_URI") or default_tracking_uri(Path("adapterfleet-runs"))


@fail_cleanly
def logs(
    job_id: Annotated[str, typer.Argument(help="The submission id printed by submit.")],
    address: AddressOpt = None,
    follow: Annotated[bool, typer.Option("--follow", "-f", help="Stream until it ends.")] = False,
) -> None:
    """Print (or follow) the logs of a submitted job."""
    from adapterfleet.orchestration.jobs import job_logs

    output = job_logs(address, job_id, follow=follow)
    if isinstance(output, str):
        typer.echo(output, nl=False)
        return
    for chunk in output:
        typer.echo(chunk, nl=False)


@fail_cleanly
def stop(
    job_id: Annotated[str, typer.Argument(help="The submission id printed by submit.")],
    address: AddressOpt = None,
) -> None:
    """Stop a submitted job."""
    from adapterfleet.orchestration.jobs import stop_job

    stopped = stop_job(address, job_id)
    typer.echo(f"{job_id}: {'stopping' if stopped else 'had already ended'}")


@fail_cleanly
def jobs(address: AddressOpt = None) -> None:
    """List the jobs of a cluster."""
    from adapterfleet.orchestration.jobs import list_jobs

    metrics_table(
        [
            {"job": j.job_id, "status": j.status, "entrypoint": j.entrypoint}
            for j in list_jobs(address)
        ]
    )


def register(app: typer.Typer) -> None:
    for command in (submit, status, logs, stop, jobs):
        app.command()(command)
