"""Where the adapters of a saved fusion run are, each checked against the sha256 its run.json
records: the folders `fuse` trained with; for a run folder moved to another place, copies of
them in its `adapters/<name>/`, the layout `pull` writes."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

from adapterfleet.adapters import ADAPTER_WEIGHTS, WeightsFileError, sha256_file
from adapterfleet.errors import PathError
from adapterfleet.training.modes import RUN_FILE


def fused_adapter_dirs(
    run_dir: Path, info: dict[str, Any], fusion_dir: Path, given_as: str = "--run "
) -> list[tuple[Path, str | None]]:
    """Each adapter the fusion mixes, in its order: (folder, the sha256 recorded for it).

    A recorded folder that is gone is looked for in `run_dir/adapters/<name>/`; a folder whose
    weights are not the ones recorded (retrained in place) is refused: the fusion learned to
    mix the adapters it trained with. `given_as` names the option that gave `run_dir`."""
    from adapterfleet.fusion import read_fusion_config

    lineage = info.get("lineage") or {}
    dirs = lineage.get("adapter_dirs") or imported_fusion_adapters(run_dir, fusion_dir)
    hashes = lineage.get("adapter_sha256")
    hashes = hashes if isinstance(hashes, list) and len(hashes) == len(dirs) else []
    _, names, _, _ = read_fusion_config(fusion_dir)
    names = names if len(names) == len(dirs) else [Path(d).parent.name for d in dirs]
    found = []
    for recorded, sha, name in itertools.zip_longest(dirs, hashes, names):
        folder = Path(recorded)
        if not folder.is_dir():
            folder = run_dir / "adapters" / name
            if not folder.is_dir():
                raise PathError(
                    f"{given_as}{run_dir}: its fusion's adapter folder {recorded} (run.json "
                    f"lineage.adapter_dirs) is gone; move it back, copy it to {folder}, or fuse "
                    "again with --adapters at its new place"
                )
        check_unchanged(folder, sha, run_dir)
        found.append((folder, sha))
    return found


def check_unchanged(directory: Path, sha256: str | None, run_dir: Path) -> None:
    """Refuse an adapter whose weights changed after `run_dir` trained with them (retrained in
    place): their sha256 is not the one run.json records."""
    weights = directory / ADAPTER_WEIGHTS
    if sha256 and weights.is_file() and sha256_file(weights) != sha256:
        raise WeightsFileError(
            f"{weights} changed after {run_dir} was trained with it (its sha256 is not the one "
            f"{run_dir / RUN_FILE} records); restore that adapter or train the run again"
        )


def imported_fusion_adapters(run_dir: Path, fusion_dir: Path) -> list[str]:
    """The adapters of a fusion folder that records no folders of them (an imported fusion):
    `adapters/<name>/` in the run folder, the layout `pull` writes; the import commands that
    put them there where one is missing (the error named only Python's load_adapter)."""
    from adapterfleet.fusion import read_fusion_config

    _, names, _, _ = read_fusion_config(fusion_dir)
    dirs = [run_dir / "adapters" / name for name in names]
    missing = [name for name, folder in zip(names, dirs, strict=True) if not folder.is_dir()]
    if missing:
        raise PathError(
            f"--run {run_dir}: its fusion mixes {', '.join(names)}, and the folder holds no "
            f"adapter folder of {', '.join(missing)} (an imported fusion records none); import "
            f"each into it (adapterfleet import-adapter THEIR_DIR --out "
            f"{run_dir / 'adapters' / missing[0]} for each) and evaluate again"
        )
    return [str(folder) for folder in dirs]
