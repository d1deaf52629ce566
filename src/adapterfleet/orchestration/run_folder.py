"""The `--out` of `train` and `fuse`: checked before any training, and written so that a run
folder is always one whole run: an earlier run there is replaced once the new one is saved."""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

from adapterfleet._files import follow_umask
from adapterfleet.adapters import read_adapter_config
from adapterfleet.config import ConfigError
from adapterfleet.training.modes import RUN_FILE


@contextlib.contextmanager
def fresh_run_dir(out_dir: Path) -> Iterator[Path]:
    """Where a single run writes: `out_dir` when it is new or empty; when it holds an earlier
    run (a run.json), a folder beside it that replaces it whole once the new run is saved, so a
    failure keeps the earlier run and no part of it (a `model/`, a `fusion/`) outlives it. A
    file, the current folder and a folder of other files are refused before any training."""
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
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.new-", dir=out.parent))
    follow_umask(staging)  # it becomes the run folder: not mkdtemp's 0700
    try:
        yield staging
        _swap(staging, out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)  # a failed run's half (gone after a swap)


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
