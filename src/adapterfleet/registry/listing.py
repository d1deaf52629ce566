"""Listing a pipeline's registered models: the `best` (else latest) version of each, read
directly from a SQLite store or a server's REST API where possible, through MLflow otherwise."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from adapterfleet.registry import rest_read, sqlite_read
from adapterfleet.registry.info import KINDS, ModelVersionInfo, info_from_mlflow, parse_model_name
from adapterfleet.registry.models import paged, search_versions
from adapterfleet.registry.store import get_client, sqlite_path
from adapterfleet.registry.tags import BEST_ALIAS, quote

if TYPE_CHECKING:
    from mlflow import MlflowClient

_SEARCH_MODELS_PAGE = 1_000


def list_models(
    uri: str, prefix: str, kind: str = "adapter", alias: str = BEST_ALIAS, *, every: bool = False
) -> list[ModelVersionInfo]:
    """One entry per registered model `<prefix>.<kind>.*`, sorted by name: the version
    under `alias`, or the latest version when the alias is not set (`every`: each of its
    versions, newest first). Two paged searches, whatever the number of models."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    head = f"{prefix}.{kind}."
    db = sqlite_path(uri)
    try:
        if db is not None and db.is_file():
            return _pick_versions(sqlite_read.model_versions(db, head), alias, every)
        if rest_read.is_http(uri):
            server = rest_read.Server.from_uri(uri)
            return _pick_versions(rest_read.model_versions(server, head), alias, every)
    except sqlite_read.Unreadable:
        pass  # not a store the direct reads know: ask MLflow
    client = get_client(uri)
    pattern = quote(head + "%")  # '_' in the prefix is a LIKE wildcard: filtered exactly below
    models = {
        rm.name: rm
        for rm in _search_models(client, f"name LIKE {pattern}")
        if rm.name.startswith(head) and parse_model_name(rm.name) is not None
    }
    versions: dict[str, dict[int, Any]] = {}
    for mv in search_versions(client, f"name LIKE {pattern}"):
        if mv.name in models:
            versions.setdefault(mv.name, {})[int(mv.version)] = mv
    out: list[ModelVersionInfo] = []
    for name in sorted(models):
        by_number = versions.get(name)
        if not by_number:
            continue
        model_aliases = {a: int(v) for a, v in (models[name].aliases or {}).items()}
        chosen = model_aliases.get(alias)
        if chosen not in by_number:
            chosen = max(by_number)
        for number in sorted(by_number, reverse=True) if every else [chosen]:
            names = [a for a, v in model_aliases.items() if v == number]
            out.append(info_from_mlflow(by_number[number], aliases=names))
    return out


def _pick_versions(
    found: Mapping[str, tuple[list[ModelVersionInfo], dict[str, int]]], alias: str, every: bool
) -> list[ModelVersionInfo]:
    """`list_models`' choice over what `sqlite_read` / `rest_read.model_versions` found."""
    out = []
    for name in sorted(found):
        versions, aliases = found[name]
        if not versions or parse_model_name(name) is None:
            continue
        by_number = {info.version: info for info in versions}
        if every:
            out.extend(by_number[n] for n in sorted(by_number, reverse=True))
            continue
        chosen = aliases.get(alias)
        out.append(by_number[chosen if chosen in by_number else max(by_number)])
    return out


def _search_models(client: MlflowClient, filter_string: str) -> list[Any]:
    return paged(client.search_registered_models, filter_string, _SEARCH_MODELS_PAGE)
