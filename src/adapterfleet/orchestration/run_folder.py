"""The `--out` of `train` and `fuse`: checked before any training, and written so that a run
folder is always one whole run: an earlier run there is replaced once the new one is saved."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

from adapterfleet._files import follow_umask
from adapterfleet._locks import LockHeld, sole_lock
from adapterfleet.adapters import ADAPTER_CONFIG, read_adapter_config
from adapterfleet.config import ConfigError
from adapterfleet.console import Say, silent
from adapterfleet.training.modes import RUN_FILE


@contextlib.contextmanager
def fresh_run_dir(out_dir: Path, say: Say = silent) -> Iterator[Path]:
    """Where a single run writes: `out_dir` when it is new or empty; when it holds an earlier
    run (a run.json), a folder beside it that replaces it whole once the new run is saved, so a
    failure keeps the earlier run and no part of it (a `model/`, a `fusion/`) outlives it; said
    through `say` before any training (it was replaced without a word). A file, the current
    folder and a folder of other files are refused before any training."""
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out: {out} is a file; give a folder for the run")
    if not out.exists() or not any(out.iterdir()):
        yield out
        return
    resolved, here = out.resolve(), Path.cwd()
    if resolved == here or resolved in here.parents:
        raise ConfigError(f"--out: {out} is the current folder or holds it; give a new folder")
    if not (out / RUN_FILE).is_file():
        names = sorted(p.name for p in out.iterdir())
        shown = ", ".join(names[:5]) + (", ..." if len(names) > 5 else "")
        raise ConfigError(
            f"--out: {out} holds files that are not a run ({shown}); give a new or empty folder "
            "(a folder an earlier run wrote is replaced once the new run is saved)"
        )
    say(
        f"--out {out} holds an earlier run ({_described(out)}): this run replaces it once it is "
        "saved; stop now (Ctrl-C) to keep it, and give another --out"
    )
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.new-", dir=out.parent))
    follow_umask(staging)  # it becomes the run folder: not mkdtemp's 0700
    try:
        yield staging
        _swap(staging, out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)  # a failed run's half (gone after a swap)


@contextlib.contextmanager
def run_folder_lock(out_dir: Path, lock_path: Path) -> Iterator[None]:
    """Hold `lock_path` for the block (`sole_lock`: a killed command leaves none that refuses),
    or refuse at once, in one line, naming the pid that holds it: two commands with one `--out`
    would replace each other's kept epochs and run folder."""
    command = sys.argv[1] if sys.argv[1:2] in (["train"], ["fuse"]) else "train or fuse"
    with contextlib.ExitStack() as held:
        try:
            held.enter_context(sole_lock(lock_path, f"{os.getpid()} {command}"))
        except LockHeld as other:
            pid, *words = other.note.split() or ["?"]
            raise ConfigError(
                f"--out {out_dir}: another adapterfleet {' '.join(words) or 'train or fuse'} is "
                f"writing this run folder (pid {pid}); wait for it to end, or give another --out"
            ) from None
        yield


def _described(out: Path) -> str:
    """`st-a rte, learning_rate 0.0001, accuracy 0.6250`, from the run's run.json."""
    try:
        run = json.loads((out / RUN_FILE).read_text(encoding="utf-8"))
        words = [f"{run['mode']} {run['task']}"]
        rate = (run.get("train_config") or {}).get("learning_rate")
        words += [f"learning_rate {rate:g}"] if isinstance(rate, int | float) else []
        metrics = run.get("dev_metrics") or {}
        words += [f"{k} {v:.4f}" for k, v in list(metrics.items())[:1] if isinstance(v, float)]
        return ", ".join(words)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return RUN_FILE


def _swap(new: Path, out: Path) -> None:
    """Put `new` at `out`, the earlier run moved away first and deleted last."""
    old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old-", dir=out.parent))
    old.rmdir()
    out.rename(old)
    try:
        new.rename(out)
    except OSError:
        old.rename(out)
        raise
    shutil.rmtree(old, ignore_errors=True)


def check_fusion_adapters(adapter_dirs: Sequence[Path], out_dir: Path) -> None:
    """What `fuse --adapters` can be refused for from the folders alone, before the base
    model is loaded: a folder that is not a saved adapter, an adapter that is not a pfeiffer
    one (AdapterFusion fuses those), two adapters of one name, one inside `--out`."""
    names: dict[str, Path] = {}
    out = Path(out_dir).resolve()
    for folder in adapter_dirs:
        _check_adapter_folder(Path(folder))
        name, config, _ = read_adapter_config(folder)
        if config.architecture != "pfeiffer":
            raise ConfigError(
                f"--adapters: {folder} is a {config.architecture} adapter; AdapterFusion fuses "
                "pfeiffer adapters (st-a runs), so train it with --mode st-a"
            )
        if name in names:
            raise ConfigError(
                f"--adapters: {names[name]} and {folder} are both adapters named {name!r}; a "
                "fusion mixes adapters of distinct tasks, so give one of them"
            )
        names[name] = folder
        if out == Path(folder).resolve() or out in Path(folder).resolve().parents:
            raise ConfigError(
                f"--adapters: {folder} lies inside --out {out_dir}, which the new run "
                "replaces; give another --out"
            )


def _check_adapter_folder(folder: Path) -> None:
    """A folder that is there and not a run folder; a run folder is refused naming the adapter
    folder in it (a train run's `adapter/`, an MT-A run's `adapters/<task>/`)."""
    if not folder.exists():
        raise ConfigError(f"--adapters {folder}: does not exist; give a saved adapter folder")
    if not folder.is_dir():
        raise ConfigError(f"--adapters {folder}: is a file; give a saved adapter folder")
    if (folder / ADAPTER_CONFIG).is_file() or not (folder / RUN_FILE).is_file():
        return  # an adapter, or read_adapter_config says what the folder lacks
    inside = [folder / "adapter"] if (folder / "adapter").is_dir() else []
    if (folder / "adapters").is_dir():
        inside = sorted(p for p in (folder / "adapters").iterdir() if p.is_dir())
    if not inside:
        raise ConfigError(
            f"--adapters {folder}: a run folder with no adapter in it (a fusion, full or head "
            "run); give the adapter folder of an st-a run (its adapter/)"
        )
    its = "its adapter folder" if len(inside) == 1 else "one of its adapter folders"
    raise ConfigError(
        f"--adapters {folder}: a run folder; give {its}: {', '.join(map(str, inside))}"
    )
