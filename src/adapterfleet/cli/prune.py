"""`adapterfleet prune TARGET`: keep the adapters a fusion uses most, train the smaller fusion."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from adapterfleet.cli.options import BudgetOpt, ConfigOpt, SetOpt, at_least, checked_store, load
from adapterfleet.cli.output import metrics_table, resumable
from adapterfleet.registry.tags import BEST_ALIAS

# What Ctrl-C leaves (it said only `interrupted`).
KEPT = (
    "the pruned fusions registered so far stay registered, and the finished epochs of the one "
    "training are kept; the same command goes on from there"
)


def prune(
    target: Annotated[str, typer.Argument(help="Task whose registered fusion to prune.")],
    config: ConfigOpt,
    keep: Annotated[
        list[int] | None,
        typer.Option(
            "--keep", "-k", metavar="K", help="Adapters to keep (repeat for several fusions)."
        ),
    ] = None,
    threshold: Annotated[
        float | None,
        typer.Option(help="Keep the adapters whose mean fusion weight is at least this."),
    ] = None,
    alias: Annotated[str, typer.Option(help="Registry alias of the fusion to prune.")] = BEST_ALIAS,
    version: Annotated[
        int | None, typer.Option(help="Version number of the fusion (instead of --alias).")
    ] = None,
    budget: BudgetOpt = None,
    set_: SetOpt = None,
) -> None:
    """Rank the adapters of TARGET's fusion by their mean fusion weight on its dev set, train the
    fusion over the top k (default ⌈n/2⌉, ⌈n/4⌉, … 1) and register each as alias pruned-<k>;
    report accuracy and inference speed against the number of adapters kept (table + PNG, also
    logged to MLflow). `best` stays on the fusion it was on."""
    for kept in keep or ():
        at_least(kept, 1, "--keep")
    cfg = load(config, set_, budget)
    from adapterfleet.orchestration.commands import prune_registered

    checked_store(cfg.tracking_uri, read_only=False)
    with resumable(KEPT):
        report = prune_registered(
            cfg,
            target,
            progress=sys.stderr.isatty(),
            say=lambda line: typer.echo(line, err=True),
            keep=keep,
            threshold=threshold,
            alias=alias,
            version=version,
        )
    metrics_table(report.rows())
    typer.echo(f"report: {report.folder / 'report'} (prune.md, prune.json, prune.png)")


def register(app: typer.Typer) -> None:
    app.command()(prune)
