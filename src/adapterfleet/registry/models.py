"""Model registry: register adapter/fusion versions idempotently, look them up (`pulling`
downloads them)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from adapterfleet.registry.errors import RegistryError
from adapterfleet.registry.info import (
    ModelVersionInfo,
    info_from_mlflow,
    sha256_file,
)
from adapterfleet.registry.logs import quieter
from adapterfleet.registry.redact import redact
from adapterfleet.registry.store import get_client
from adapterfleet.registry.tags import (
    BEST_ALIAS,
    TAG_ARTIFACT_PATH,
    TAG_COMPANION,
    TAG_SHA256,
    TAG_SWEEP,
    TAG_TRIAL_ID,
    TAG_WEIGHTS_FILE,
    quote,
)

if TYPE_CHECKING:
    from mlflow import MlflowClient

_SEARCH_VERSIONS_PAGE = 10_000


def register_version(
    uri: str,
    name: str,
    run_id: str,
    artifact_path: str,
    weights_file: str | Path,
    tags: Mapping[str, Any] | None = None,
    alias: str | None = BEST_ALIAS,
    companions: Mapping[str, str | Path] | None = None,
    *,
    description: str | None = None,
    model_description: str | None = None,
) -> ModelVersionInfo:
    """Register `runs:/<run_id>/<artifact_path>` as a version of `name` and point `alias` at it.

    `description`: the new version's (markdown, shown in the UI); `model_description`: the
    registered model's, set when the model has none yet.

    `companions` maps other artifact folders of the same run that belong with it (e.g. the
    task head, `{"head": <local model_head.safetensors>}`) to their local weights file: their
    file names and hashes are tagged too, so `pull_companion` can verify them.

    Tags: the caller's (redacted) plus `sha256` of the local `weights_file` (the file that was
    logged into that artifact folder), its file name and the artifact path. Idempotent: a
    version of `name` with the same `adapterfleet.trial_id` and `.sweep` tags (or, without a
    trial, the same run and artifact path) is returned instead of creating another; concurrent
    registrations of the same trial converge on the lowest version."""
    weights = Path(weights_file)
    if not weights.is_file():
        raise RegistryError(
            f"cannot register {name}: weights file {weights} does not exist; "
            "pass the local file that was logged as the artifact"
        )
    artifact_path = artifact_path.strip("/")
    all_tags = {
        **redact(tags),
        TAG_SHA256: sha256_file(weights),
        TAG_WEIGHTS_FILE: weights.name,
        TAG_ARTIFACT_PATH: artifact_path,
        **_companion_tags(name, companions or {}),
    }
    trial = _trial_key(all_tags)
    client = get_client(uri)
    existing = _find_registered(client, name, run_id, artifact_path, trial)
    if existing is None:
        _create_registered_model(client, name, model_description)
        source = f"runs:/{run_id}/{artifact_path}"
        with quieter("mlflow.store.model_registry.abstract_store"):
            created = client.create_model_version(
                name, source, run_id=run_id, tags=all_tags, description=description
            )
        existing = _find_registered(client, name, run_id, artifact_path, trial)
        if existing is None:  # pragma: no cover - search cannot see what was just created
            existing = int(created.version)
        elif existing != int(created.version):
            # A concurrent registration of the same trial won with a lower version.
            client.delete_model_version(name, str(created.version))
    if alias:
        _set_alias(client, name, alias, existing)
    return info_from_mlflow(client.get_model_version(name, str(existing)))


def _set_alias(client: MlflowClient, name: str, alias: str, version: int) -> None:
    """Point `alias` at `version`. Two processes setting the same alias at once can make the
    server's insert fail on its unique key (seen with SQLite behind `mlflow server`): then the
    alias is read back, and set again only if it points elsewhere."""
    from mlflow.exceptions import MlflowException

    for attempt in range(5):
        try:
            client.set_registered_model_alias(name, alias, str(version))
            return
        except MlflowException:
            try:
                current = client.get_model_version_by_alias(name, alias)
            except MlflowException:
                current = None
            if current is not None and int(current.version) == version:
                return
            if attempt == 4:
                raise
            time.sleep(0.2 * (attempt + 1))


def _trial_key(tags: dict[str, str]) -> str | None:
    """The search clause of the trial a version comes from: its id within its sweep (a later
    sweep of other settings reuses the grid's trial ids), None for a version of no trial."""
    if TAG_TRIAL_ID not in tags:
        return None
    clause = f"tags.`{TAG_TRIAL_ID}` = {quote(tags[TAG_TRIAL_ID])}"
    if TAG_SWEEP in tags:
        clause += f" AND tags.`{TAG_SWEEP}` = {quote(tags[TAG_SWEEP])}"
    return clause


def _find_registered(
    client: MlflowClient, name: str, run_id: str, artifact_path: str, trial: str | None
) -> int | None:
    """Lowest version of `name` for this trial (or run + artifact path), None if none. One
    whose run `mlflow gc` purged is not it: a fusion trained again for the same lineage (its
    trial id) registers a new version."""
    from adapterfleet.registry.purged import purged_runs

    if trial is not None:
        found = search_versions(client, f"name = {quote(name)} AND {trial}")
    else:
        source = f"runs:/{run_id}/{artifact_path}"
        found = [
            mv
            for mv in search_versions(client, f"name = {quote(name)} AND run_id = {quote(run_id)}")
            if mv.source == source or (mv.tags or {}).get(TAG_ARTIFACT_PATH) == artifact_path
        ]
    others = {mv.run_id for mv in found} - {run_id}
    gone = purged_runs(client.tracking_uri, others) if others else set()
    return min((int(mv.version) for mv in found if mv.run_id not in gone), default=None)


def _create_registered_model(client: MlflowClient, name: str, description: str | None) -> None:
    """Create model `name` with `description`; one that exists gets it only if it has none."""
    from mlflow.exceptions import MlflowException

    try:
        client.create_registered_model(name, description=description)
    except MlflowException as exc:
        if exc.error_code != "RESOURCE_ALREADY_EXISTS":
            raise
        if description and not client.get_registered_model(name).description:
            client.update_registered_model(name, description=description)


def paged(search: Any, filter_string: str, page_size: int) -> list[Any]:
    """Every result of an MLflow search that pages with `page_token`."""
    out: list[Any] = []
    token: str | None = None
    while True:
        page = search(filter_string, max_results=page_size, page_token=token)
        out.extend(page)
        token = page.token
        if not token:
            return out


def search_versions(client: MlflowClient, filter_string: str) -> list[Any]:
    return paged(client.search_model_versions, filter_string, _SEARCH_VERSIONS_PAGE)


def _is_missing(exc: Exception) -> bool:
    from mlflow.exceptions import MlflowException

    if not isinstance(exc, MlflowException):
        return False
    if exc.error_code == "RESOURCE_DOES_NOT_EXIST":
        return True
    return exc.error_code == "INVALID_PARAMETER_VALUE" and "not found" in str(exc)


def get_version(
    uri: str, name: str, alias: str | None = None, version: int | str | None = None
) -> ModelVersionInfo | None:
    """The version of `name` under `alias`, or number `version`, or else the latest one.
    None when the model, the alias or the version does not exist."""
    return _get_version(get_client(uri), name, alias, version)


def _get_version(
    client: MlflowClient, name: str, alias: str | None, version: int | str | None
) -> ModelVersionInfo | None:
    if alias is not None and version is not None:
        raise ValueError("give alias or version, not both")
    try:
        if alias is not None:
            return info_from_mlflow(client.get_model_version_by_alias(name, alias))
        if version is not None:
            return info_from_mlflow(client.get_model_version(name, str(int(version))))
        found = search_versions(client, f"name = {quote(name)}")
        if not found:
            return None
        latest = max(found, key=lambda mv: int(mv.version))
        return info_from_mlflow(client.get_model_version(name, str(latest.version)))
    except Exception as exc:
        if _is_missing(exc):
            return None
        raise


def find_version_by_tag(uri: str, name: str, tag: str, value: str) -> ModelVersionInfo | None:
    """The lowest version of `name` whose tag `tag` equals `value`, or None."""
    client = get_client(uri)
    found = versions_tagged(client, name, tag, value)
    if not found:
        return None
    return info_from_mlflow(client.get_model_version(name, str(found[0].version)))


def versions_tagged(client: MlflowClient, name: str, tag: str, value: str) -> list[Any]:
    """MLflow's versions of `name` whose tag `tag` equals `value`, lowest first; none when
    the model is not registered."""
    try:
        found = search_versions(client, f"name = {quote(name)} AND tags.`{tag}` = {quote(value)}")
    except Exception as exc:
        if _is_missing(exc):
            return []
        raise
    return sorted(found, key=lambda mv: int(mv.version))


def set_alias(uri: str, name: str, alias: str, version: int) -> None:
    """Point `alias` of `name` at `version` (safe against a concurrent setter)."""
    _set_alias(get_client(uri), name, alias, int(version))


def check_inside(name: str, version: int, what: str, value: str, single: bool = False) -> None:
    """Registry tags become paths under the pull's staging folder: refuse any that could point
    outside it (absolute, `..`, or a folder where a file name is expected)."""
    parts = Path(value).parts
    if not value or Path(value).is_absolute() or ".." in parts or (single and len(parts) != 1):
        raise RegistryError(
            f"model {name} version {version}: its {what} {value!r} would leave the download "
            "folder; refusing to pull it (re-register the version with register_version)"
        )


def _companion_tags(name: str, companions: Mapping[str, str | Path]) -> dict[str, str]:
    tags = {}
    for folder, weights_file in companions.items():
        weights = Path(weights_file)
        if not weights.is_file():
            raise RegistryError(
                f"cannot register {name}: the {folder}/ weights file {weights} does not exist"
            )
        check_inside(name, 0, "companion folder", folder, single=True)
        tags[TAG_COMPANION + folder] = f"{weights.name}:{sha256_file(weights)}"
    return tags
