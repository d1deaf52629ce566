"""`adapterfleet prune TARGET`: keep the adapters a fusion uses most, train the smaller fusion."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path
from typing import Annotated

import typer

from adapterfleet.cli.output import fail_cleanly, metrics_table


@fail_cleanly
def prune(
    target: Annotated[str, typer.Argument(help="Task whose registered fusion to prune.")],
    config: Annotated[Path, typer.Option("--config", "-c", help="Pipeline YAML file.")],
    keep: Annotated[
        list[int] | None,
        typer.Option("--keep", "-k", help="Adapters to keep (repeat for several fusions)."),
    ] = None,
    threshold: Annotated[
        float | None,
        typer.Option(help="Keep the adapters whose mean fusion weight is at least this."),
    ] = None,
    alias: Annotated[str, typer.Option(help="Registry alias of the fusion to prune.")] = "best",
    version: Annotated[
        int | None, typer.Option(help="Version number of the fusion (instead of --alias).")
    ] = None,
    set_: Annotated[
        list[str] | None,
        typer.Option("--set", "-o", help="Override any config key: key.path=value (repeatable)."),
    ] = None,
) -> None:
    """Rank the adapters of TARGET's fusion by their mean fusion weight on its dev set, train the
    fusion over the top k (default ⌈n/2⌉, ⌈n/4⌉, … 1) and register each as alias pruned-<k>;
    report accuracy and inference speed against the number of adapters kept (table + PNG, also
    logged to MLflow). `best` stays on the fusion it was on."""
    from adapterfleet.config import load_config
    from adapterfleet.orchestration.prune import prune_fusion
    from adapterfleet.orchestration.sweep import tracking_uri_of
    from adapterfleet.registry import ensure_experiment

    cfg = load_config(config, set_ or [])
    training = replace(cfg.fusion.training, progress=sys.stderr.isatty())
    cfg = replace(cfg, fusion=replace(cfg.fusion, training=training))
    uri = tracking_uri_of(cfg)
    report = prune_fusion(
        cfg,
        target,
        uri,
        ensure_experiment(uri, cfg.name),
        keep=keep,
        threshold=threshold,
        alias=alias,
        version=version,
        say=lambda line: typer.echo(line, err=True),
    )
    metrics_table(report.rows())
    typer.echo(f"report: {report.folder / 'report'} (prune.md, prune.json, prune.png)")


def register(app: typer.Typer) -> None:
    app.command()(prune)
