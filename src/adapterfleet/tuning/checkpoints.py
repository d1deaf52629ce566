"""Tune's experiment folder as a restore finds it: the checkpoint folders Tune may list that
are gone (`refill_deleted_checkpoints`)."""

from __future__ import annotations

import re
from pathlib import Path

CHECKPOINT_DIR = re.compile(r"checkpoint_(\d{6})")
STATE_LAG = 4  # checkpoints a trial may have made after Tune last saved its experiment state


def refill_deleted_checkpoints(path: Path) -> list[Path]:
    """Empty folders where each trial's latest deleted checkpoints were, before Tune restores
    the experiment at `path`; the folders made.

    Tune deletes a trial's older checkpoints as it makes new ones (`num_to_keep`) but saves its
    experiment state only every few seconds: a sweep interrupted in between is restored with
    checkpoints listed that are gone. Tune then failed to delete them again, logged an ERROR and
    stopped recording the trial's new checkpoints, and the next resume failed the trial for good
    (`Could not recover from checkpoint as it does not exist on storage anymore`). An empty
    folder is deleted without a word, and a trial handed one continues from its own checkpoint
    in its run folder (`training.lifecycle.resume_job`)."""
    made = []
    for trial in (p for p in path.iterdir() if p.is_dir()) if path.is_dir() else ():
        found = {int(m[1]): c for c in trial.iterdir() if (m := CHECKPOINT_DIR.fullmatch(c.name))}
        held = [index for index, folder in found.items() if any(folder.iterdir())]
        if not held:
            continue
        for index in range(max(0, min(held) - STATE_LAG), max(held)):
            if index not in found:
                folder = trial / f"checkpoint_{index:06d}"
                folder.mkdir()
                made.append(folder)
    return made
