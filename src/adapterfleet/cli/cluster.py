"""`adapterfleet submit / status / logs / stop`: the pipeline as a Ray job on a cluster."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from adapterfleet.cli.options import (
    BudgetOpt,
    ConfigArg,
    DashboardAddressOpt,
    MaybeConfigOpt,
    NameArg,
    SetOpt,
    TrackingUriOpt,
    budget_overrides,
    checked_store,
    chosen_config,
    config_command,
)
from adapterfleet.cli.output import metrics_table
from adapterfleet.cli.pipeline_ref import resolve


def submit(
    config_arg: ConfigArg = None,
    address: DashboardAddressOpt = None,
    working_dir: Annotated[Path, typer.Option(help="Folder uploaded for the job.")] = Path("."),
    budget: BudgetOpt = None,
    set_: SetOpt = None,
    wait: Annotated[bool, typer.Option("--wait", help="Wait for the job to end.")] = False,
    config: MaybeConfigOpt = None,
) -> None:
    """Submit the pipeline to a Ray cluster through the Jobs API (token auth from RAY_AUTH_TOKEN,
    RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token)."""
    from adapterfleet.orchestration.job_errors import command
    from adapterfleet.orchestration.jobs import submit_pipeline

    config = chosen_config(config_arg, config)
    overrides = budget_overrides(budget, set_)
    job_id = submit_pipeline(
        config, address, overrides, working_dir=working_dir, wait=wait, say=typer.echo
    )
    # with the job's own --budget and --set: `storage` and `tracking_uri` are given so there
    progress = config_command("status", config, set_, budget)
    if wait:  # it ended SUCCEEDED (else an error)
        typer.echo(f"job {job_id} SUCCEEDED\n  results:   {progress}")
        return
    follow = command("logs", address, job_id, "--follow")
    typer.echo(f"  follow it: {follow}\n  progress:  {progress}")


def status(
    name: NameArg = None,
    config: MaybeConfigOpt = None,
    tracking_uri: TrackingUriOpt = None,
    budget: BudgetOpt = None,
    set_: SetOpt = None,
) -> None:
    """Tasks, trials done/running/failed, registered versions and fusion state of a pipeline."""
    from adapterfleet.results.status import status_by_name

    ref = resolve(name, config, tracking_uri, budget, set_)
    # a pipeline that has not run yet has no store: its plan is shown all the same (with -c;
    # a NAME alone has no plan, so a missing store is said as such)
    checked_store(ref.tracking_uri, read_only=True, must_exist=ref.config is None)
    if ref.config is not None:
        from adapterfleet.orchestration.report_scope import config_status

        typer.echo(config_status(ref.config, ref.tracking_uri).render())
    else:
        typer.echo(status_by_name(ref.name, ref.tracking_uri).render())


def logs(
    job_id: Annotated[str, typer.Argument(help="The submission id printed by submit.")],
    address: DashboardAddressOpt = None,
    follow: Annotated[bool, typer.Option("--follow", "-f", help="Stream until it ends.")] = False,
) -> None:
    """Print (or follow) the logs of a submitted job; followed to its end, the exit status
    says how it ended (1: FAILED or STOPPED), as `submit --wait`'s does."""
    from adapterfleet.orchestration.jobs import job_logs, job_note, job_status

    output = job_logs(address, job_id, follow=follow)
    last = ""
    for chunk in [output] if isinstance(output, str) else output:
        typer.echo(chunk, nl=False)
        last = chunk or last
    note = job_note(address, job_id)
    if note:
        if not last.endswith("\n"):
            typer.echo()  # the note on a line of its own
        typer.echo(note, err=True)
    if follow and (status := job_status(address, job_id)) != "SUCCEEDED":
        if not note:
            typer.echo(f"job {job_id} ended {status}", err=True)
        raise typer.Exit(1)  # a script's `logs --follow && next` stopped at nothing


def stop(
    job_id: Annotated[str, typer.Argument(help="The submission id printed by submit.")],
    address: DashboardAddressOpt = None,
) -> None:
    """Stop a submitted job."""
    from adapterfleet.orchestration.jobs import stop_job

    stopped = stop_job(address, job_id)
    typer.echo(f"{job_id}: {'stopping' if stopped else 'had already ended'}")


def jobs(address: DashboardAddressOpt = None) -> None:
    """List the jobs submitted to a cluster."""
    from adapterfleet.orchestration.jobs import jobs_note, list_jobs

    found = list_jobs(address)
    jobs_ = [j for j in found if not j.driver]
    rows = [{"job": j.job_id, "status": j.status, "entrypoint": j.entrypoint} for j in jobs_]
    metrics_table(rows)
    if note := jobs_note(jobs_):
        typer.echo(note, err=True)
    if drivers := len(found) - len(jobs_):
        typer.echo(
            f"({drivers} {'driver' if drivers == 1 else 'drivers'} that joined the cluster "
            "themselves, e.g. run --address, not shown: Ray calls them SUCCEEDED whatever their "
            "exit status)",
            err=True,
        )


def register(app: typer.Typer) -> None:
    for command in (submit, status, logs, stop, jobs):
        app.command()(command)
