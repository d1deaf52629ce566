"""A pulled folder: what `adapterfleet pull` writes for one registered version.

    <the version's files>     adapter_config.json + adapter.safetensors (a fusion: its own two)
    head/                     the head registered with it, when one was
    adapters/<task>/          a fusion's adapter versions, as its `adapter.<task>=vN` tags name
    pulled.json               what the folder holds (`PulledRecord`)

Every part is sha256-verified against the registry before the folder is put in place, whole:
a folder an earlier pull wrote (its pulled.json lists its files) is replaced, with a word of
what it held; a folder of other files is refused.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from adapterfleet.registry.errors import RegistryError
from adapterfleet.registry.info import (
    ModelVersionInfo,
    adapter_model_name,
    parse_model_name,
    version_with_aliases,
)
from adapterfleet.registry.pulling import (
    DEFAULT_RETRY_TIMEOUT_S,
    check_replaceable,
    fetch_version,
    fused_adapter,
    pull_companion,
    version_to_pull,
)
from adapterfleet.registry.tags import (
    BEST_ALIAS,
    TAG_BASE_MODEL,
    TAG_BASE_MODEL_DTYPE,
    TAG_COMPANION,
)

PULLED_FILE = "pulled.json"
HEAD_FOLDER = "head"
ADAPTERS_FOLDER = "adapters"
_EARLIER_PULL = f"one an earlier pull wrote, as its {PULLED_FILE} lists,"


@dataclass(frozen=True)
class PulledFolder:
    """What a pull wrote: the version, whether its head came with it, a fusion's adapter
    versions, and what an earlier pull had left in the folder (None: nothing)."""

    folder: Path
    info: ModelVersionInfo
    head: bool
    adapters: tuple[ModelVersionInfo, ...]
    replaced: str | None


def pull_folder(
    uri: str,
    name: str,
    dest: str | Path,
    *,
    alias: str | None = BEST_ALIAS,
    version: int | None = None,
    retry_timeout_s: float = DEFAULT_RETRY_TIMEOUT_S,
) -> PulledFolder:
    """Pull version `version` of `name` (else the one under `alias`) into `dest` with what was
    registered beside it (see the module's docstring); on any failure `dest` is left as it was."""
    info = version_to_pull(uri, name, alias, version)
    dest = Path(dest).expanduser().resolve()
    dest.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{dest.name}.pull-", dir=dest.parent))
    try:
        folder = fetch_version(uri, info, staging / dest.name, retry_timeout_s=retry_timeout_s)
        head = _pull_head(uri, info, folder, retry_timeout_s)
        adapters = _pull_adapters(uri, info, folder / ADAPTERS_FOLDER, retry_timeout_s)
        _write_record(folder, info, head, adapters)
        replaced = _replace(dest, folder)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return PulledFolder(dest, info, head is not None, adapters, replaced)


def _pull_head(uri: str, info: ModelVersionInfo, folder: Path, timeout_s: float) -> str | None:
    """The sha256 of the head registered with `info`, pulled into `head/`; None without one."""
    recorded = info.tags.get(TAG_COMPANION + HEAD_FOLDER)
    if not recorded:
        return None
    pull_companion(uri, info, HEAD_FOLDER, folder / HEAD_FOLDER, retry_timeout_s=timeout_s)
    return recorded.rpartition(":")[2]


def _pull_adapters(
    uri: str, info: ModelVersionInfo, folder: Path, timeout_s: float
) -> tuple[ModelVersionInfo, ...]:
    """A fusion's adapter versions, each pulled into `folder/<task>`."""
    parsed = parse_model_name(info.name)
    if parsed is None:
        return ()
    found = []
    for task, number in info.fused.items():
        adapter = fused_adapter(uri, info, adapter_model_name(parsed[0], task), number)
        fetch_version(uri, adapter, folder / task, retry_timeout_s=timeout_s)
        found.append(adapter)
    return tuple(found)


def _write_record(
    folder: Path,
    info: ModelVersionInfo,
    head: str | None,
    adapters: tuple[ModelVersionInfo, ...],
) -> None:
    record = {
        "model": info.name,
        "version": info.version,
        "aliases": list(info.aliases),
        "kind": info.kind,
        "task": info.task,
        "base_model": info.tags.get(TAG_BASE_MODEL),
        "base_model_dtype": info.tags.get(TAG_BASE_MODEL_DTYPE),  # None: registered before it
        "sha256": info.sha256,
        "head_sha256": head,
        "adapters": {
            a.task or a.name: {"model": a.name, "version": a.version, "sha256": a.sha256}
            for a in adapters
        },
        "files": sorted(p.name for p in folder.iterdir()),
    }
    (folder / PULLED_FILE).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")


def _replace(dest: Path, folder: Path) -> str | None:
    """Put `folder` at `dest`; what an earlier pull left there, in words (None: nothing)."""
    replaced = None
    if dest.exists():
        earlier = _earlier_record(dest)
        files = earlier.get("files")
        recorded = [str(f) for f in files] if isinstance(files, list) else []
        check_replaceable(dest, folder, recorded, replaced=_EARLIER_PULL)
        replaced = _described(earlier) if any(dest.iterdir()) else None
        shutil.rmtree(dest)
    folder.replace(dest)
    return replaced


def _earlier_record(dest: Path) -> dict[str, Any]:
    """The pulled.json an earlier pull left in `dest`; empty when there is none to read."""
    try:
        record = read_pulled(dest)
    except RegistryError:
        return {}
    return record or {}


def _described(record: dict[str, Any]) -> str:
    """`demo.adapter.demo_aspect v1`, or the files of a pull that wrote no pulled.json."""
    model, version = record.get("model"), record.get("version")
    if isinstance(model, str) and isinstance(version, int):
        return f"{model} {version_with_aliases(version)}"
    return "the files an earlier pull wrote"


def read_pulled(folder: Path) -> dict[str, Any] | None:
    """The pulled.json of `folder`, None when it has none; refused when it is not a record."""
    path = folder / PULLED_FILE
    if not path.is_file():
        return None
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise RegistryError(f"{path} cannot be read ({error}); pull the folder again") from None
    if not isinstance(record, dict):
        raise RegistryError(f"{path} is not the record a pull writes; pull the folder again")
    return record
