"""`adapterfleet import-adapter / export`: folders of AdapterHub `adapters` 1.x, both ways."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from adapterfleet.cli.options import writable_folder
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

    _report(import_adapterhub(src, writable_folder(out, "--out"), base_model, name=name))


def export(
    src: Annotated[
        Path,
        typer.Argument(
            help="adapterfleet adapter, head or fusion folder, a run folder, or a folder "
            "adapterfleet pull wrote."
        ),
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
    head: Annotated[
        bool,
        typer.Option(
            "--head/--no-head",
            help="Write the head with the adapter or fusion (a run's or pulled folder's head/); "
            "--no-head: the adapter or fusion alone.",
        ),
    ] = True,
) -> None:
    """Write adapterfleet's adapter, fusion and/or head in another library's layout."""
    from adapterfleet.interop import export_adapterhub

    if format_ not in FORMATS:
        raise ConfigError(f"--format {format_!r} is unknown; use one of {', '.join(FORMATS)}")
    fused = _check_whole_run(src)
    converted = export_adapterhub(
        src, writable_folder(out, "--out"), base_model, torch_bin=torch_bin, head=head
    )
    _report(converted)
    if missing := [name for name in converted.fused if name != converted.adapter]:
        _say_fused_adapters_stay(src, missing, fused)
    if converted.head is not None:
        _say_decoder_padding(converted.directory)


def _say_decoder_padding(directory: Path) -> None:
    """A decoder's head reads its last real token, which the reference finds from the model's
    `config.pad_token_id`: Llama and GPT-2 configs have none, and its outputs on a padded
    batch differed from ours without a word."""
    import json

    from adapterfleet.adapters.architectures import causal_type

    try:
        saved = json.loads((directory / "head_config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    if causal_type(saved.get("model_type")):
        typer.echo(
            "the head reads the last real token, which the reference finds from the model's "
            "config.pad_token_id: set it to the pad token adapterfleet pads with (the "
            "tokenizer's, else its end-of-sequence token) and pad on the right, or its "
            "outputs on a padded batch differ"
        )


def _check_whole_run(src: Path) -> list[Path]:
    """A run folder that lost its adapter/ or fusion/ would export its head alone; a fusion
    run's adapters retrained in place since would be named as the ones it mixes. Returns where
    a fusion run's adapters are (found as `evaluate` finds them)."""
    from adapterfleet.orchestration.limits import check_run_parts, run_part
    from adapterfleet.orchestration.local import read_run_info
    from adapterfleet.training.fused_adapters import fused_adapter_dirs
    from adapterfleet.training.modes import RUN_FILE

    if not (src / RUN_FILE).is_file():
        return []
    info = read_run_info(src)
    check_run_parts(src, info, given_as="")
    if info.get("mode") != "fusion" or (fusion := run_part(src, "fusion")) is None:
        return []
    return [folder for folder, _ in fused_adapter_dirs(src, info, fusion, given_as="")]


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


def _say_fused_adapters_stay(src: Path, missing: list[str], found: list[Path]) -> None:
    """The reference loads a fusion only over the adapters it mixes; a fusion run holds none
    of them (its run.json names their folders, `found` where they are now; a pulled fusion's
    pulled.json, its adapters/)."""
    from adapterfleet.orchestration.local import read_run_info
    from adapterfleet.registry.pulled import PULLED_FILE
    from adapterfleet.training.modes import RUN_FILE

    dirs = read_run_info(src).get("lineage", {}).get("adapter_dirs", []) if src.is_dir() else []
    named_in = RUN_FILE if (src / RUN_FILE).is_file() else PULLED_FILE
    where = f" ({named_in}: {', '.join(dirs)})" if dirs else ""
    if found:  # checked against run.json's hashes; copies in adapters/ where moved
        where = f" ({', '.join(map(str, found))})"
    folders = "their own folders" if len(missing) > 1 else "its own folder"
    typer.echo(
        f"the reference loads the fusion only after the adapters it mixes: export "
        f"{', '.join(missing)} from {folders} too{where}, then load_adapter each before "
        "load_adapter_fusion"
    )


def register(app: typer.Typer) -> None:
    app.command("import-adapter")(import_adapter)
    app.command()(export)
