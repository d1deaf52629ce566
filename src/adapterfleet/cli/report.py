"""`adapterfleet report NAME`: the paper's Table 1 and Figure 4 from a pipeline's MLflow runs."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from adapterfleet.cli.output import fail_cleanly

DEFAULT_FOLDER = Path("adapterfleet-report")


@fail_cleanly
def report(
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
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            help="Folder to write (default <storage>/report/NAME with -c, else "
            "./adapterfleet-report/NAME).",
        ),
    ] = None,
    budget: Annotated[
        str | None, typer.Option(help="With -c: the budget the pipeline ran with.")
    ] = None,
    set_: Annotated[list[str] | None, typer.Option("--set", "-o", help="key.path=value")] = None,
) -> None:
    """Table 1 (mean ± std over seeds per task and system, the paper's BERT-base numbers beside
    them) and Figure 4 (mean fusion weights per layer) from the pipeline's finished MLflow runs:
    written to a folder (table1.md, figure4.png, report.json) and logged to MLflow."""
    from adapterfleet.cli.cluster import _default_uri
    from adapterfleet.orchestration.report import build_report

    if config is not None:
        from adapterfleet.config import load_config
        from adapterfleet.orchestration.sweep import tracking_uri_of

        cfg = load_config(config, [*([f"budget={budget}"] if budget else []), *(set_ or [])])
        if name is not None and name != cfg.name:
            raise typer.BadParameter(f"{name!r} is not the name of {config} ({cfg.name!r})")
        name, uri = cfg.name, tracking_uri or tracking_uri_of(cfg)
        folder = Path(cfg.storage) / "report" / cfg.name
    elif name is None:
        raise typer.BadParameter("give the pipeline NAME or its config with -c CONFIG")
    else:
        uri, folder = tracking_uri or _default_uri(), DEFAULT_FOLDER / name
    result = build_report(name, uri, out or folder)
    typer.echo(result.table)
    typer.echo(f"\nreport: {result.out_dir} ({', '.join(p.name for p in result.files)})")
    if result.run_id:
        typer.echo(f"logged to MLflow run {result.run_id} of experiment {name!r}")


def register(app: typer.Typer) -> None:
    app.command()(report)
