"""`adapterfleet import-adapter / export`: folders of AdapterHub `adapters` 1.x, both ways."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from adapterfleet.cli.output import metrics_table
from adapterfleet.config import ConfigError

if TYPE_CHECKING:
    from adapterfleet.interop import Converted

FORMATS = ("adapterhub",)
OutOpt = Annotated[Path, typer.Option("--out", help="Folder to write.")]
BaseOpt = Annotated[
    str | None,
    typer.Option(help="Base model (hub id, path or minilm-l6); default: the one the files record."),
]


def import_adapter(
    src: Annotated[
        Path,
        typer.Argument(
            help="Folder written by AdapterHub adapters (save_adapter, "
            "save_adapter_fusion or save_head)."
        ),
    ],
    out: OutOpt,
    base_model: BaseOpt = None,
    name: Annotated[str | None, typer.Option(help="Name for what is imported.")] = None,
) -> None:
    """Convert an adapter, fusion and/or head saved by AdapterHub adapters 1.x into
    adapterfleet's files (refusing settings adapterfleet does not implement)."""
    from adapterfleet.interop import import_adapterhub

    _report(import_adapterhub(src, out, base_model, name=name))


def export(
    src: Annotated[
        Path, typer.Argument(help="adapterfleet adapter, head or fusion folder, or a run folder.")
    ],
    out: OutOpt,
    format_: Annotated[str, typer.Option("--format", help="Target format: adapterhub.")],
    base_model: BaseOpt = None,
    torch_bin: Annotated[
        bool,
        typer.Option(
            "--torch-bin/--no-torch-bin",
            help="Also write the torch pickle files (pytorch_adapter.bin, ...) the reference "
            "loads when not told use_safetensors=True; only for readers that need them.",
        ),
    ] = False,
) -> None:
    """Write adapterfleet's adapter, fusion and/or head in another library's layout."""
    from adapterfleet.interop import export_adapterhub

    if format_ not in FORMATS:
        raise ConfigError(f"--format {format_!r} is unknown; use one of {', '.join(FORMATS)}")
    _report(export_adapterhub(src, out, base_model, torch_bin=torch_bin))


def _report(converted: Converted) -> None:
    rows = [
        {"kind": kind, "name": value}
        for kind in ("adapter", "fusion", "head")
        if (value := getattr(converted, kind)) is not None
    ]
    if converted.fused:
        rows[[r["kind"] for r in rows].index("fusion")]["fuses"] = ", ".join(converted.fused)
    metrics_table(rows)
    typer.echo(f"written to {converted.directory}")


def register(app: typer.Typer) -> None:
    app.command("import-adapter")(import_adapter)
    app.command()(export)
