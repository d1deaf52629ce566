"""Pulling a registered version: its artifact folder downloaded, its weights verified against
the sha256 the registry recorded, and put in place whole."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Collection
from pathlib import Path

from adapterfleet._files import follow_umask
from adapterfleet.registry.errors import RegistryError, call_with_retry, safe_uri
from adapterfleet.registry.info import ModelVersionInfo, sha256_file, version_with_aliases
from adapterfleet.registry.models import check_inside, get_version, search_versions
from adapterfleet.registry.purged import purged_text
from adapterfleet.registry.store import ARTIFACTS_DIRNAME, get_client, sqlite_path
from adapterfleet.registry.tags import BEST_ALIAS, TAG_COMPANION, quote

DEFAULT_RETRY_TIMEOUT_S = 120.0
_SAME_FILES = "one holding only the files this pull writes, as an earlier pull of them left it,"


def pull(
    uri: str,
    name: str,
    dest: str | Path,
    alias: str | None = BEST_ALIAS,
    version: int | str | None = None,
    weights_filename: str | None = None,
    *,
    retry_timeout_s: float = DEFAULT_RETRY_TIMEOUT_S,
) -> Path:
    """Download the artifact folder of a version into `dest` (replaced as a whole) and verify
    the sha256 of its weights file against the version's `sha256` tag. Returns `dest`.

    Selects `version` when given, else `alias`. `weights_filename` defaults to the file
    name recorded at registration. On a mismatch nothing is left at `dest`.
    """
    info = version_to_pull(uri, name, alias, version)
    return fetch_version(uri, info, dest, weights_filename, retry_timeout_s=retry_timeout_s)


def fetch_version(
    uri: str,
    info: ModelVersionInfo,
    dest: str | Path,
    weights_filename: str | None = None,
    *,
    retry_timeout_s: float = DEFAULT_RETRY_TIMEOUT_S,
) -> Path:
    """`pull` of the version `info` already found."""
    expected = info.sha256
    filename = weights_filename or info.weights_file
    artifact_path = info.artifact_path
    if not expected or not filename or not info.run_id or artifact_path is None:
        raise RegistryError(
            f"model {info.name} version {info.version} lacks the sha256/weights/run metadata "
            "adapterfleet records; re-register it with register_version"
        )
    return _fetch_verified(
        uri, info, artifact_path, filename, expected, Path(dest), retry_timeout_s
    )


def version_to_pull(
    uri: str, name: str, alias: str | None = BEST_ALIAS, version: int | str | None = None
) -> ModelVersionInfo:
    """The version of `name` numbered `version`, else under `alias`; refused naming the versions
    and aliases that exist when there is no such version."""
    alias = None if version is not None else alias
    info = get_version(uri, name, alias=alias, version=version)
    if info is not None:
        return info
    wanted = f"version {version}" if version is not None else f"alias '{alias}'"
    raise RegistryError(
        f"model {name} has no {wanted} in {safe_uri(uri)}; {registered_versions(uri, name)}"
    )


def fused_adapter(uri: str, fusion: ModelVersionInfo, name: str, number: int) -> ModelVersionInfo:
    """Version `number` of adapter model `name`, which `fusion` fuses; refused naming the
    fusion and the fix when it is no longer registered (deleted in the registry): the fusion
    cannot run without it, and a fusion over other adapters is another fusion."""
    info = get_version(uri, name, version=number)
    if info is not None:
        return info
    raise RegistryError(
        f"model {fusion.name} version {fusion.version} fuses {name} version {number}, which is "
        f"no longer registered in {safe_uri(uri)} ({registered_versions(uri, name)}), so it "
        "cannot be pulled or used; run the pipeline again (or `adapterfleet fuse --wait`) to "
        "train a fusion over the adapters registered now"
    )


def registered_versions(uri: str, name: str) -> str:
    """What `name` has, for a refusal: `its versions: v1 (@best), v2 (@pruned-2)`."""
    from mlflow.exceptions import MlflowException

    client = get_client(uri)
    numbers = sorted(int(mv.version) for mv in search_versions(client, f"name = {quote(name)}"))
    if not numbers:
        return "no version of it is registered there; register it first or check the name"
    try:
        aliases = client.get_registered_model(name).aliases or {}
    except MlflowException:
        aliases = {}
    named: dict[int, list[str]] = {}
    for alias, number in sorted(aliases.items()):
        named.setdefault(int(number), []).append(alias)
    return "its versions: " + ", ".join(version_with_aliases(n, named.get(n, ())) for n in numbers)


def pull_companion(
    uri: str,
    info: ModelVersionInfo,
    folder: str,
    dest: str | Path,
    *,
    retry_timeout_s: float = DEFAULT_RETRY_TIMEOUT_S,
) -> Path:
    """Download the artifact folder `folder` registered with version `info` (see
    `register_version(companions=...)`, e.g. its task head) into `dest`, verified like `pull`."""
    recorded = info.tags.get(TAG_COMPANION + folder, "")
    filename, _, expected = recorded.rpartition(":")
    if not filename or not expected or not info.run_id:
        raise RegistryError(
            f"model {info.name} version {info.version} records no hash for its {folder}/ "
            "folder; re-register it (register_version(..., companions=...)) to pull that folder"
        )
    return _fetch_verified(uri, info, folder, filename, expected, Path(dest), retry_timeout_s)


def _fetch_verified(
    uri: str,
    info: ModelVersionInfo,
    artifact_path: str,
    filename: str,
    expected: str,
    dest: Path,
    retry_timeout_s: float,
) -> Path:
    """Download `artifact_path` of the version's run into `dest` (replaced as a whole) once the
    sha256 of its `filename` equals `expected`; on a mismatch nothing is left at `dest`."""
    name = info.name
    assert info.run_id is not None
    check_inside(name, info.version, "artifact path", artifact_path)
    check_inside(name, info.version, "weights file", filename, single=True)
    dest = dest.expanduser().resolve()
    dest.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{dest.name}.pull-", dir=dest.parent))
    follow_umask(staging)  # it becomes the pulled folder: not mkdtemp's 0700
    try:
        local = _download_found(uri, info, artifact_path, staging, retry_timeout_s)
        if local.is_file():
            folder = staging / "files"
            folder.mkdir()
            local = local.replace(folder / local.name).parent
        weights = local / filename
        if not weights.is_file():
            raise RegistryError(
                f"model {name} version {info.version}: {filename} not found in its artifact "
                f"{artifact_path}; pass weights_filename or re-register"
            )
        actual = sha256_file(weights)
        if actual != expected:
            raise RegistryError(
                f"model {name} version {info.version}: {filename} has sha256 {actual} but the "
                f"registry recorded {expected}; the stored artifact was altered or corrupted, "
                "re-register a good copy"
            )
        if dest.exists():
            check_replaceable(dest, local)
            shutil.rmtree(dest)
        local.replace(dest)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return dest


def check_replaceable(
    dest: Path, incoming: Path, recorded: Collection[str] = (), replaced: str = _SAME_FILES
) -> None:
    """A pull replaces `dest` whole: only a folder that holds nothing but names the pulled
    folder has, or names an earlier pull `recorded` writing there, and neither the current
    folder nor one above it, whose loss the user would not expect. `replaced`: which folders
    the refusal says are replaced."""
    where = f"cannot pull into {dest}"
    if not dest.is_dir():
        raise RegistryError(f"{where}: it is a file, not a folder; give a folder to write into")
    if dest == Path.cwd() or dest in Path.cwd().parents:
        raise RegistryError(f"{where}: it is the current folder or holds it; give a new folder")
    others = sorted(
        p.name
        for p in dest.iterdir()
        if p.name not in recorded and not (incoming / p.name).exists()
    )
    if others:
        shown = ", ".join(others[:5]) + (", ..." if len(others) > 5 else "")
        raise RegistryError(
            f"{where}: it holds files this pull does not write ({shown}), which replacing the "
            f"folder would delete; give a new or empty folder ({replaced} is replaced)"
        )


def _download_found(
    uri: str, info: ModelVersionInfo, artifact_path: str, dst: Path, timeout_s: float
) -> Path:
    """`_download`, with a store whose artifacts are not where it recorded them said in one
    line: a local store copied or moved to another folder keeps the absolute artifact paths it
    was made with (MLflow's own error was a 77-line traceback, `Failed to download ...`), and
    a version whose run is gone (`Run with id=... not found`, after `mlflow gc`)."""
    from mlflow.exceptions import MlflowException

    assert info.run_id is not None
    try:
        return Path(_download(uri, info.run_id, artifact_path, dst, timeout_s))
    except MlflowException as error:
        lost = "Failed to download artifacts" in str(error)  # the run is there, its files not
        if not lost and error.error_code == "RESOURCE_DOES_NOT_EXIST":
            raise _run_gone(uri, info) from None
        if not lost:
            raise
        where = get_client(uri).get_run(info.run_id).info.artifact_uri
        copied = _in_moved_store(uri, where, artifact_path)
        if copied is not None:  # read from the copy: the sha256 check follows
            if copied.is_file():
                return Path(shutil.copy2(copied, dst / copied.name))
            return Path(shutil.copytree(copied, dst / copied.name))
    local = where.removeprefix("file://")
    moved = where.startswith("file://") or where.startswith("/")
    fix = (
        f"{local} does not exist: a store moved or copied to another folder still points at its "
        "artifacts where it was made, and its own mlartifacts/ does not hold them; put it "
        "back there, bring its mlartifacts/ along, or train and register again in a new store"
        if moved and not Path(local).exists()
        else "the store's artifacts were removed or cannot be read from here"
    )
    raise RegistryError(
        f"model {info.name} version {info.version}: its files ({artifact_path}) are not at "
        f"{safe_uri(where)}, where the store recorded them; {fix}"
    ) from None


def _in_moved_store(uri: str, where: str, artifact_path: str) -> Path | None:
    """A run's files in a SQLite store's own `mlartifacts/` when the storage folder was copied
    or moved with it: at the same place below `mlartifacts/` as the store recorded, which is
    the folder the store was made in. None where they are not there."""
    from urllib.parse import unquote

    db = sqlite_path(uri)
    recorded = unquote(where.removeprefix("file://"))
    if db is None or f"/{ARTIFACTS_DIRNAME}/" not in recorded:
        return None
    below = recorded.rsplit(f"/{ARTIFACTS_DIRNAME}/", 1)[1]
    found = db.parent / ARTIFACTS_DIRNAME / below / artifact_path
    return found if found.exists() and not Path(recorded).exists() else None


def _run_gone(uri: str, info: ModelVersionInfo) -> RegistryError:
    """The registry keeps a version whose run `mlflow gc` purged (its experiment deleted, then
    collected), and nothing of its files: train it again."""
    return RegistryError(
        f"model {info.name} version {info.version}: {purged_text(info, safe_uri(uri))}; delete "
        "this version in the model registry and run the pipeline again to train and register "
        "it anew"
    )


def _download(uri: str, run_id: str, artifact_path: str, dst: Path, timeout_s: float) -> str:
    from mlflow.artifacts import download_artifacts

    # a progress bar per small adapter folder is noise in job logs; respect an explicit choice
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")

    return call_with_retry(
        lambda: download_artifacts(
            run_id=run_id, artifact_path=artifact_path, dst_path=str(dst), tracking_uri=uri
        ),
        what=f"download runs:/{run_id}/{artifact_path}",
        timeout_s=timeout_s,
    )
