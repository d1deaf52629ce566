"""`adapterfleet report NAME`: the paper's Table 1 and Figure 4 from a pipeline's MLflow runs."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from adapterfleet.cli.options import (
    BudgetOpt,
    MaybeConfigOpt,
    NameArg,
    SetOpt,
    TrackingUriOpt,
    checked_store,
)
from adapterfleet.cli.output import table1
from adapterfleet.cli.pipeline_ref import resolve

DEFAULT_FOLDER = Path("adapterfleet-report")


def report(
    name: NameArg = None,
    config: MaybeConfigOpt = None,
    tracking_uri: TrackingUriOpt = None,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            help="Folder to write (default <storage>/report/NAME with -c, else "
            "./adapterfleet-report/NAME).",
        ),
    ] = None,
    budget: BudgetOpt = None,
    set_: SetOpt = None,
) -> None:
    """Table 1 (mean ± std over seeds per task and system, the paper's BERT-base numbers beside
    them) and Figure 4 (mean fusion weights per layer) from the pipeline's finished MLflow runs
    (with -c, only those made with the config's settings): written to a folder (table1.md,
    figure4.png, report.json) and logged to MLflow."""
    from adapterfleet.orchestration.report_scope import report_scope
    from adapterfleet.registry.store import read_only_store
    from adapterfleet.results.report import build_report

    ref = resolve(name, config, tracking_uri, budget, set_)
    checked_store(ref.tracking_uri, read_only=True)
    scope = None
    if ref.config is not None:
        folder = Path(ref.config.storage) / "report" / ref.name
        scope = report_scope(ref.config, ref.tracking_uri, set_ or ())
    else:
        folder = DEFAULT_FOLDER / ref.name
    logged = not read_only_store(ref.tracking_uri)  # a read-only copy: written to --out only
    to = out or folder
    result = build_report(ref.name, ref.tracking_uri, to, log_to_mlflow=logged, scope=scope)
    table1(result)
    typer.echo(f"\nreport: {result.out_dir} ({', '.join(p.name for p in result.files)})")
    if result.run_id:
        typer.echo(f"logged to MLflow run {result.run_id} of experiment {ref.name!r}")
    elif not logged:
        typer.echo(f"not logged to MLflow: the store {ref.tracking_uri} cannot be written here")
    else:
        typer.echo("not logged to MLflow: no cell has a number (the report logged before stays)")


def register(app: typer.Typer) -> None:
    app.command()(report)
