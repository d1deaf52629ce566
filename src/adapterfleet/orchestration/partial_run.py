"""The finished epochs of a `train` or `fuse` run, kept beside its `--out` until the run is saved,
so that Ctrl-C or SIGTERM loses no finished epoch and the same command continues:

    runs/rte.partial/
        settings.json             what the run trains: task, mode, settings, data, adapters, base
        checkpoints/epoch-0002/   the loop checkpoint of the newest finished epoch

A run continues from the newest checkpoint there when its settings are the ones saved beside
it, and starts afresh, saying why, when they are not. Once the run folder is in place at
`--out`, the folder goes; a run that fails (not one stopped) removes it only where it began it.
The whole run holds a lock beside them (`.rte.lock`): a second command with the same `--out`
is refused while the first runs.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from adapterfleet.adapters import ADAPTER_WEIGHTS, sha256_file
from adapterfleet.config import BaseModelSpec, ConfigError
from adapterfleet.console import Say
from adapterfleet.data import TokenizedTask
from adapterfleet.orchestration.run_folder import run_folder_lock
from adapterfleet.training import Callback, EpochReport, JobWorkdir, TrainConfig
from adapterfleet.training.checkpoint import RESUMABLE_CHANGES
from adapterfleet.training.modes import RUN_FILE
from adapterfleet.training.workdir import CHECKPOINTS

SETTINGS_FILE = "settings.json"


def partial_dir(out_dir: Path) -> Path:
    """`<out>.partial`, beside `out_dir`."""
    out = Path(out_dir)
    if out.name in ("", ".", ".."):
        out = out.resolve()
    return out.with_name(out.name + ".partial")


def lock_file(out_dir: Path) -> Path:
    """`.<out>.lock`, beside `out_dir`: held while a run writes there."""
    partial = partial_dir(out_dir)
    return partial.with_name(f".{partial.name.removesuffix('.partial')}.lock")


def run_settings(
    base: BaseModelSpec,
    max_length: int,
    training: TrainConfig,
    tasks: Sequence[TokenizedTask],
    **parts: Any,
) -> dict[str, Any]:
    """What a kept epoch was trained with, so a run continues only the same training: the
    `parts` (command, task, mode, reduction factor, ...), the base, the training settings but
    how progress shows and where it runs, and the tokenised rows of each task."""
    trained = {k: v for k, v in training.to_dict().items() if k not in RESUMABLE_CHANGES}
    settings = {
        **parts,
        "base_model": {"name": str(base), "dtype": base.dtype, "layout": list(base.layout)},
        "max_length": max_length,
        "training": trained,
        "data": {task.name: [task.train.key, task.dev.key] for task in tasks},
    }
    return json.loads(json.dumps(settings, default=str))  # as it reads back from the file


def adapter_files(adapter_dirs: Sequence[Path]) -> list[list[str]]:
    """The fused adapters as settings: each folder and the sha256 of its weights (an adapter
    trained again in place makes the kept epochs another fusion's)."""
    return [[str(Path(d).resolve()), sha256_file(Path(d) / ADAPTER_WEIGHTS)] for d in adapter_dirs]


class _SaveEpoch(Callback):
    """The epoch's loop checkpoint, then the one before it deleted."""

    def __init__(self, workdir: JobWorkdir) -> None:
        self.workdir = workdir

    def on_epoch_end(self, report: EpochReport) -> None:
        report.save_checkpoint(self.workdir.checkpoint_dir(report.epoch))
        self.workdir.prune_checkpoints(keep_epoch=report.epoch)


class KeptEpochs:
    """The `<out>.partial` folder of one run: where it resumes from, and its epoch callback."""

    def __init__(self, out_dir: Path, say: Say) -> None:
        self.folder = partial_dir(out_dir)
        self.say = say
        self.workdir = JobWorkdir(self.folder)
        self.callback: Callback = _SaveEpoch(self.workdir)
        self.found = self.folder.exists()  # a stopped run's, kept when this one fails
        _check_ours(self.folder)

    def resume(self, settings: dict[str, Any]) -> Path | None:
        """The checkpoint to continue from (said in a line), None to start afresh (said, with
        why, where epochs of other settings were kept); `settings` saved for the next run."""
        latest = self.workdir.latest_checkpoint()
        saved = _read_settings(self.folder)
        if latest is not None and saved == settings:
            epoch, checkpoint = latest
            of = settings["training"]["max_epochs"]
            if epoch >= of:  # stopped while the run folder was written
                self.say(
                    f"all {of} epochs had finished; saving the run (checkpoint in {self.folder})"
                )
            else:
                self.say(f"resuming from epoch {epoch + 1} of {of} (checkpoint in {self.folder})")
            return checkpoint
        if latest is not None:
            why = _differences(saved, settings) if saved else f"{SETTINGS_FILE} is unreadable"
            self.say(
                f"starting afresh: the epochs kept in {self.folder} were trained with other "
                f"settings ({why}); they are replaced"
            )
        shutil.rmtree(self.folder, ignore_errors=True)
        self.folder.mkdir(parents=True)
        _write_json(self.folder / SETTINGS_FILE, settings)
        return None

    def clear(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


@contextlib.contextmanager
def kept_epochs(out_dir: Path, say: Say) -> Iterator[KeptEpochs]:
    """The run's kept epochs: gone when the block ends (the run is saved); kept when Ctrl-C or
    SIGTERM stops it; when it fails, gone where this run began the folder, else kept (a stopped
    run's epochs, and the ones this run added to them, for the next run to continue). The
    block holds the `--out` lock: where another command holds it, a ConfigError at once."""
    with run_folder_lock(out_dir, lock_file(out_dir)):
        kept = KeptEpochs(out_dir, say)
        try:
            yield kept
        except Exception:
            if not kept.found:
                kept.clear()
            raise
        kept.clear()


def interrupted_line(out_dir: Path) -> str:
    """What a stopped `train` or `fuse` kept, for `interrupted: ...`."""
    folder, out = partial_dir(out_dir), Path(out_dir)
    earlier = f" (the earlier run in {out} is as it was)" if (out / RUN_FILE).is_file() else ""
    latest = JobWorkdir(folder).latest_checkpoint() if folder.is_dir() else None
    if latest is None:
        return f"no epoch had finished, so none is kept{earlier}; run the same command again"
    saved = _read_settings(folder) or {}
    of = saved.get("training", {}).get("max_epochs", "?")
    epochs = "epoch 1" if latest[0] == 1 else f"epochs 1-{latest[0]}"
    return (
        f"finished {epochs} of {of} kept in {folder}{earlier}; run the same command again to "
        "continue"
    )


def _check_ours(folder: Path) -> None:
    """`<out>.partial` is a folder this module wrote, or not there."""
    if not folder.exists():
        return
    names = sorted(p.name for p in folder.iterdir()) if folder.is_dir() else None
    if names is None or not set(names) <= {SETTINGS_FILE, f"{SETTINGS_FILE}.tmp", CHECKPOINTS}:
        raise ConfigError(
            f"--out: {folder} is in the way: train and fuse keep a run's finished epochs there "
            "until it is saved; move it away, or give another --out"
        )


def _read_settings(folder: Path) -> dict[str, Any] | None:
    try:
        return json.loads((folder / SETTINGS_FILE).read_text())
    except (OSError, ValueError):
        return None


def _write_json(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n")
    os.replace(tmp, path)


def _differences(saved: dict[str, Any], settings: dict[str, Any]) -> str:
    """`learning_rate 0.01, now 0.02; data`: each setting that differs, a short one with both
    values (the training settings by their own names)."""
    flat_saved = {**saved, **saved.get("training", {})}
    flat_now = {**settings, **settings.get("training", {})}
    said = []
    for key in sorted(set(flat_saved) | set(flat_now)):
        before, now = flat_saved.get(key), flat_now.get(key)
        if key == "training" or before == now:
            continue
        short = all(v is None or isinstance(v, int | float | str) for v in (before, now))
        said.append(f"{key} {before}, now {now}" if short else key)
    return "; ".join(said) or "an older format"
