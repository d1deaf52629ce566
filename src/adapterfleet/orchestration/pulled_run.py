"""A folder `adapterfleet pull` wrote, read as `evaluate --run` and `export` read a run folder:
its pulled.json (`registry.pulled`) in the terms of a run's run.json."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from adapterfleet.config import ConfigError
from adapterfleet.registry.pulled import ADAPTERS_FOLDER, PULLED_FILE, read_pulled


def pulled_run_info(folder: Path) -> dict[str, Any]:
    """The parts of a run.json evaluate reads, from the folder's pulled.json: the base model the
    version was registered for, and the sha256 the registry recorded for its adapter, or for a
    fusion its adapters' folders under adapters/ and theirs. Empty for a folder pull did not
    write."""
    record = read_pulled(folder)
    if record is None:
        return {}
    adapters = record.get("adapters") or {}
    shaped = isinstance(adapters, dict) and all(
        isinstance(a, dict) and isinstance(a.get("sha256"), str) for a in adapters.values()
    )
    if not shaped or not isinstance(record.get("sha256"), str | None):
        raise ConfigError(
            f"{folder / PULLED_FILE}: sha256 or adapters is not what pull writes (a sha256; "
            "task: {model, version, sha256}); pull the folder again"
        )
    if adapters:
        lineage: dict[str, Any] = {
            "adapter_dirs": [str(folder / ADAPTERS_FOLDER / task) for task in adapters],
            "adapter_sha256": [a["sha256"] for a in adapters.values()],
        }
    else:
        lineage = {"adapter_sha256": record.get("sha256")}
    info = {"base_model": str(record.get("base_model") or ""), "lineage": lineage}
    if record.get("base_model_dtype"):  # the dtype it trained in, which evaluate loads
        info["base_model_dtype"] = record["base_model_dtype"]
    return info
