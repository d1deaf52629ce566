"""What the registry holds for a pipeline: its registered adapters and fusions, listed or pulled."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from adapterfleet.config import ConfigError, PipelineConfig
from adapterfleet.registry import (
    PulledFolder,
    adapter_model_name,
    fusion_model_name,
    get_version,
    list_models,
    pull_folder,
)
from adapterfleet.registry.info import KINDS
from adapterfleet.registry.pulled import ADAPTERS_FOLDER, HEAD_FOLDER
from adapterfleet.registry.tags import BEST_ALIAS
from adapterfleet.results.formats import number_from_tag, version_label


def registered_rows(config: PipelineConfig, every: bool = False) -> list[dict[str, Any]]:
    """One row per registered adapter and fusion of the pipeline: the `best` version (else the
    latest) as `v3 @best`, and every other version an alias names (`v2 @pruned-2`); with
    `every`, each version. Its dev metric and the reduction factor and learning rate it was
    trained with, and its seed."""
    rows = []
    for kind in KINDS:
        shown = list_models(config.tracking_uri, config.registry_prefix, kind, every=True)
        chosen = list_models(config.tracking_uri, config.registry_prefix, kind)
        picked = {(info.name, info.version) for info in chosen}
        for info in shown:
            if not (every or info.aliases or (info.name, info.version) in picked):
                continue
            metric = info.tags.get("metric") or ""
            value = info.tags.get("metric_value", info.tags.get(f"dev_{metric}"))
            rows.append(
                {
                    "kind": kind,
                    "task": info.task,
                    "model": info.name,
                    "version": version_label(info.version, info.aliases),
                    "metric": metric,
                    "value": "" if number_from_tag(value) is None else number_from_tag(value),
                    "rf": info.tags.get("reduction_factor", ""),
                    "lr": info.tags.get("learning_rate", ""),
                    "seed": info.tags.get("seed", ""),  # versions of other seeds told apart
                }
            )
    return rows


def check_pull_task(
    config: PipelineConfig, task: str, *, alias: str | None = None, version: int | None = None
) -> None:
    """`pull TASK` names a task of the config, and one version (checked before the store is
    opened)."""
    if task not in config.tasks:
        known = ", ".join(config.tasks) or "(none)"
        raise ConfigError(f"pull: {task!r} is not a task of the config; tasks there: {known}")
    if alias is not None and version is not None:
        raise ConfigError(
            f"pull: --alias {alias} and --version {version} each choose a version; give one of "
            f"them (without either, --alias {BEST_ALIAS})"
        )


def pull_registered(
    config: PipelineConfig,
    task: str,
    to: Path,
    *,
    fusion: bool = False,
    alias: str | None = None,
    version: int | None = None,
) -> PulledFolder:
    """Download `task`'s registered adapter (or fusion) into `to` with its head (and a fusion's
    adapters), each sha256-verified: by `version` when given, else by `alias` (`best`)."""
    check_pull_task(config, task, alias=alias, version=version)
    name = (fusion_model_name if fusion else adapter_model_name)(config.registry_prefix, task)
    if fusion and task not in config.fusion.targets and not get_version(config.tracking_uri, name):
        targets = ", ".join(config.fusion.targets) or "none in this config"
        raise ConfigError(
            f"pull --fusion: {task!r} is not a fusion target of the config (fusion targets: "
            f"{targets}) and no fusion of it is registered; pull its adapter without --fusion"
        )
    return pull_folder(config.tracking_uri, name, to, alias=alias or BEST_ALIAS, version=version)


def pulled_lines(pulled: PulledFolder) -> list[str]:
    """What `pull` says: the version and where it went, what came with it, what it replaced."""
    info = pulled.info
    parts = [f"its head in {HEAD_FOLDER}/" if pulled.head else ""]
    if pulled.adapters:
        fused = ", ".join(f"{a.task} v{a.version}" for a in pulled.adapters)
        parts.append(f"the adapters it fuses in {ADAPTERS_FOLDER}/: {fused}")
    came = " and ".join(part for part in parts if part)
    line = f"{info.name} {info.label} -> {pulled.folder} (sha256 verified"
    line += f", with {came})" if came else f"; v{info.version} has no head registered with it)"
    replaced = [f"replaced {pulled.replaced} there"] if pulled.replaced else []
    return [line, *replaced]
