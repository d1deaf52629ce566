"""A training job's own folder (a trial's, a fusion's, a baseline's): its run directory and
its loop checkpoints.

    <job folder>/
        run/                      the training mode's output (adapter/, head/, run.json)
        checkpoints/epoch-0003/   the loop checkpoint of the newest finished epoch

A job resumes from its newest complete checkpoint, so no finished epoch is trained twice; a
checkpoint handed in from elsewhere (Tune's copy of a trial's) is adopted when it is newer.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from adapterfleet.training.checkpoint import STATE_FILE

CHECKPOINTS = "checkpoints"


def checkpoint_epoch(directory: Path) -> int | None:
    """Epoch of a complete loop checkpoint in `directory` (its state file is written last); None
    when it has none, also when the folder goes while it is read (the loop prunes the one before
    when it saves the next, and another process may be looking)."""
    try:
        return int(json.loads((Path(directory) / STATE_FILE).read_text())["epoch"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def checkpoint_history(directory: Path) -> list[dict[str, float]]:
    """The per-epoch history a loop checkpoint carries."""
    return list(json.loads((Path(directory) / STATE_FILE).read_text())["history"])


@dataclass(frozen=True)
class JobWorkdir:
    root: Path

    @property
    def run_dir(self) -> Path:
        return self.root / "run"

    def checkpoint_dir(self, epoch: int) -> Path:
        return self.root / CHECKPOINTS / f"epoch-{epoch:04d}"

    def latest_checkpoint(self) -> tuple[int, Path] | None:
        """(epoch, folder) of the newest complete checkpoint, None when there is none."""
        folder = self.root / CHECKPOINTS
        found = []
        if folder.is_dir():
            for child in folder.iterdir():
                epoch = checkpoint_epoch(child)
                if epoch is not None:
                    found.append((epoch, child))
        return max(found, default=None)

    def prune_checkpoints(self, keep_epoch: int) -> None:
        """Delete every checkpoint folder but the one of `keep_epoch`."""
        keep = self.checkpoint_dir(keep_epoch)
        folder = self.root / CHECKPOINTS
        for child in folder.iterdir() if folder.is_dir() else ():
            if child != keep:
                shutil.rmtree(child, ignore_errors=True)

    def clear_checkpoints(self) -> None:
        """Delete every checkpoint: the job is finished and will not resume."""
        shutil.rmtree(self.root / CHECKPOINTS, ignore_errors=True)

    def adopt_checkpoint(self, source: Path) -> tuple[int, Path] | None:
        """Copy a complete checkpoint (e.g. Tune's) in as this job's own; (epoch, folder)."""
        epoch = checkpoint_epoch(source)
        if epoch is None:
            return None
        target = self.checkpoint_dir(epoch)
        if checkpoint_epoch(target) != epoch:
            staging = target.with_name(target.name + ".tmp")
            shutil.rmtree(staging, ignore_errors=True)
            shutil.copytree(source, staging)
            shutil.rmtree(target, ignore_errors=True)
            os.replace(staging, target)
        return epoch, target
