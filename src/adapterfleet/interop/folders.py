"""The folders on both sides: reading what the reference saved, finding what we saved, and
writing the reference's files."""

from __future__ import annotations

import json
import pickle
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from adapterfleet.adapters import ADAPTER_CONFIG, ADAPTER_WEIGHTS, HEAD_CONFIG, HEAD_WEIGHTS
from adapterfleet.adapters.base_model import MINILM, MINILM_HUB_ID
from adapterfleet.adapters.files import read_config
from adapterfleet.adapters.model import check_name
from adapterfleet.fusion import FUSION_CONFIG, FUSION_WEIGHTS
from adapterfleet.interop import reference as ref
from adapterfleet.interop.reference import InteropError

Tensors = dict[str, torch.Tensor]
KINDS = ("adapter", "head", "fusion")
REFERENCE_FILES = {"adapter": ref.ADAPTER_FILES, "head": ref.HEAD_FILES, "fusion": ref.FUSION_FILES}
_OUR_CONFIGS = {"adapter": ADAPTER_CONFIG, "head": HEAD_CONFIG, "fusion": FUSION_CONFIG}


@dataclass(frozen=True)
class Saved:
    """One module the reference saved: the content of its config file and its tensors."""

    where: str
    meta: dict[str, Any]
    tensors: Tensors

    @property
    def name(self) -> str:
        return str(self.meta.get("name", ""))


def check_saved_names(parts: dict[str, Saved], name: str | None) -> None:
    """The saved adapter and head names the import keeps where no `name` is given (a fusion
    takes its head's) are names ours can have; one that is not is refused before a base model
    is loaded, naming `--name`, which replaces them (a fusion's head is named `a1,a2`)."""
    for kind in ("adapter", "head"):
        if name is not None or kind not in parts:
            continue
        try:
            check_name(kind, parts[kind].name)
        except ValueError as error:
            raise InteropError(
                f"{parts[kind].where}: {error}; give the imported adapter a name with --name NAME"
            ) from None


REFERENCE_NAMES = frozenset(
    name
    for files in REFERENCE_FILES.values()
    for name in (files.config, files.safetensors, files.torch_bin)
)
OUR_NAMES = frozenset(
    (ADAPTER_CONFIG, ADAPTER_WEIGHTS, HEAD_CONFIG, HEAD_WEIGHTS, FUSION_CONFIG, FUSION_WEIGHTS)
)


def check_out(src: Path, out: Path, writes: frozenset[str]) -> None:
    """`out` may take the files a conversion `writes`: a new or empty folder, or one an earlier
    conversion the same way wrote (its files replaced); never the source or a folder inside it,
    nor a folder of other files or a part of a run (a run's own adapter would be replaced)."""
    if src.resolve() == out.resolve():
        raise InteropError(
            f"{out} is the source directory; write to another one (both formats use some of "
            "the same file names)"
        )
    if src.resolve() in out.resolve().parents:
        raise InteropError(
            f"--out: {out} is inside the source {src}; its files would be overwritten; give a "
            "folder outside it"
        )
    if out.exists() and not out.is_dir():
        raise InteropError(f"--out: {out} is a file; give a folder to write into")
    held = sorted(p.name for p in out.iterdir()) if out.exists() else []
    others = [name for name in held if name not in writes]
    if held and (others or not _written_as(out, writes)):
        shown = ", ".join((others or held)[:5]) + (", ..." if len(others or held) > 5 else "")
        raise InteropError(
            f"--out: {out} holds files this would replace or mix with ({shown}); give a new or "
            "empty folder (one an earlier conversion the same way wrote is written over)"
        )


def _written_as(folder: Path, writes: frozenset[str]) -> bool:
    """Whether `folder`'s configs are of the side `writes` names (ours carry `format_version`)
    and it is not part of a run (a `run.json` beside it)."""
    ours = writes == OUR_NAMES
    for config in (folder / name for name in writes if name.endswith(".json")):
        if config.is_file() and ("format_version" in _json_or_empty(config)) != ours:
            return False
    return not (folder.parent / "run.json").is_file()


def _json_or_empty(path: Path) -> dict[str, Any]:
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return meta if isinstance(meta, dict) else {}


def first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def _check_folder(src: Path, what: str) -> None:
    """`src` is a folder; else one line saying what it is instead ("is not a directory" read
    as a folder that exists, for a mistyped name)."""
    if not src.is_dir():
        instead = "is a file, not a folder" if src.exists() else "does not exist"
        raise InteropError(f"{src} {instead}; give the folder {what}")


# --- the reference's side --------------------------------------------------------------------


def read_reference_dir(src: Path) -> dict[str, Saved]:
    """The adapter, head and fusion the reference saved in `src`, by kind."""
    _check_folder(src, "the reference saved its adapter, head or fusion in (save_adapter)")
    parts = {}
    for kind in KINDS:
        files = REFERENCE_FILES[kind]
        if (src / files.config).is_file():
            parts[kind] = _read_saved(src, files)
    if not parts:
        names = ", ".join(f.config for f in REFERENCE_FILES.values())
        raise InteropError(
            f"{src} holds none of {names}; is it a directory saved by AdapterHub adapters?"
        )
    return parts


def _read_saved(directory: Path, files: ref.Files) -> Saved:
    path = directory / files.config
    meta = read_config(directory, files.config)
    if "format_version" in meta and "base_model" in meta:
        raise InteropError(
            f"{path} was written by adapterfleet, not by AdapterHub adapters; load it directly"
        )
    return Saved(str(path), meta, _reference_tensors(directory, files))


def _reference_tensors(directory: Path, files: ref.Files) -> Tensors:
    """The safetensors file when there is one, else the torch pickle, read as tensors only."""
    safe, pickled = directory / files.safetensors, directory / files.torch_bin
    if not safe.is_file() and not pickled.is_file():
        raise InteropError(
            f"{directory} has {files.config} but neither {files.safetensors} nor {files.torch_bin}"
        )
    try:
        if safe.is_file():
            tensors = load_file(str(safe))
        else:
            tensors = torch.load(pickled, map_location="cpu", weights_only=True)
    except (SafetensorError, pickle.UnpicklingError, OSError, RuntimeError, EOFError) as error:
        raise InteropError(f"{directory}: cannot read the weights ({_why(error, files)})") from None
    if not isinstance(tensors, dict) or not all(torch.is_tensor(t) for t in tensors.values()):
        raise InteropError(f"{directory}: the weights file does not hold a dict of tensors")
    return {str(k): t for k, t in tensors.items()}


def _why(error: BaseException, files: ref.Files) -> str:
    """Why a weights file could not be read. torch's advice when it refuses a pickle that holds
    more than tensors ("re-run with weights_only=False") would run the file's code: say the
    opposite."""
    if not isinstance(error, pickle.UnpicklingError):
        return first_line(error)
    found = re.search(r"Unsupported global: GLOBAL ([\w.]+)", str(error))
    what = f"holds a {found.group(1)}, not only tensors" if found else "is not a file of tensors"
    return (
        f"{files.torch_bin} {what}; a pickle is never loaded with its code: save the weights "
        "as safetensors with the reference (save_adapter(..., use_safetensors=True)) and "
        "import that folder"
    )


def reference_base(parts: Iterable[Saved], src: Path) -> str:
    """The base model the reference recorded (`model_name`); all-MiniLM-L6-v2's hub id is the
    packaged copy of its weights (`minilm-l6`), which needs no network."""
    for saved in parts:
        if saved.meta.get("model_name"):
            name = str(saved.meta["model_name"])
            return MINILM if name == MINILM_HUB_ID else name
    raise InteropError(f"{src} records no model_name; pass the base model (--base-model)")


def write_reference(
    out: Path, files: ref.Files, meta: dict[str, Any], tensors: Tensors, torch_bin: bool
) -> None:
    """The config file, the safetensors file and (with `torch_bin`) the torch pickle."""
    out.mkdir(parents=True, exist_ok=True)
    (out / files.config).write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
    save_file(tensors, str(out / files.safetensors), metadata={"format": "pt"})
    pickled = out / files.torch_bin
    if torch_bin:
        torch.save(tensors, pickled)
    elif pickled.exists():
        pickled.unlink()  # a stale one would be what the reference loads by default


# --- our side --------------------------------------------------------------------------------


def our_folders(src: Path, head: bool = True) -> dict[str, Path]:
    """Where our adapter, head and fusion files are: `src` itself, or its subfolders (a run's
    adapter/, head/, fusion/; a pulled folder's head/); without the head unless `head`. A
    run that fine-tuned its encoder (`model/`: full, MT-A) is refused: its head and adapters
    work only on that encoder, which the exported files would not carry."""
    _check_folder(src, "a run, pull or import-adapter wrote")
    if (src / "model").is_dir():
        raise InteropError(
            f"{src} fine-tuned its encoder (its model/ folder): its head and adapters score "
            "correctly only on that encoder, which an export does not carry; export the runs "
            "that keep the base frozen (st-a, st-a-houlsby, head, fusion)"
        )
    folders = {}
    for kind in KINDS:
        for folder in (src, src / kind):
            if (folder / _OUR_CONFIGS[kind]).is_file():
                folders[kind] = folder
                break
    if not folders:
        raise InteropError(
            f"{src} holds no adapterfleet adapter, head or fusion (nor adapter/, head/, fusion/)"
        )
    if not head and folders.pop("head", None) and not folders:
        raise InteropError(
            f"{src} holds a head alone, which --no-head leaves out: nothing to export; export "
            "the head without --no-head, or the folder of the adapter or fusion it goes with"
        )
    for kind, folder in folders.items():
        if "format_version" not in read_config(folder, _OUR_CONFIGS[kind]):
            raise InteropError(
                f"{folder / _OUR_CONFIGS[kind]} was not written by adapterfleet; to convert "
                "a reference directory use adapterfleet import-adapter"
            )
    return folders


def our_base(folders: dict[str, Path], src: Path) -> str:
    """The base model our files record (`base_model.name_or_path`)."""
    for kind, folder in folders.items():
        base = read_config(folder, _OUR_CONFIGS[kind]).get("base_model") or {}
        if base.get("name_or_path"):
            return str(base["name_or_path"])
    raise InteropError(f"{src} records no base model path; pass the base model (--base-model)")
