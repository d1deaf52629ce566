"""How `status` and `report` name a pipeline: NAME (its MLflow experiment) with a tracking URI,
or its config file (with `--budget` and `--set`), from which name and store follow."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from adapterfleet.cli.options import load
from adapterfleet.config import ConfigError, absolute_storage, resolve_tracking_uri
from adapterfleet.registry.store import use_login


@dataclass(frozen=True)
class PipelineRef:
    name: str
    tracking_uri: str
    config: Any = None  # the PipelineConfig when given with -c


def resolve(
    name: str | None,
    config: Path | None,
    tracking_uri: str | None,
    budget: str | None = None,
    overrides: list[str] | None = None,
) -> PipelineRef:
    """The pipeline a command means; a NAME that is not the config's is refused."""
    if config is not None:
        cfg = load(config, overrides, budget)
        if name is not None and name != cfg.name:
            raise ConfigError(f"{name!r} is not the name of {config} ({cfg.name!r})")
        return PipelineRef(cfg.name, _given(tracking_uri) or cfg.tracking_uri, cfg)
    if name is None:
        raise ConfigError("give the pipeline NAME or its config with -c CONFIG")
    return PipelineRef(name, _given(tracking_uri) or default_uri())


def _given(tracking_uri: str | None) -> str | None:
    """`--tracking-uri`, its login moved to MLflow's variables as for a config's own URI."""
    return use_login(tracking_uri, where="--tracking-uri") if tracking_uri else None


def default_uri() -> str:
    """$MLFLOW_TRACKING_URI, else the embedded store of ./adapterfleet-runs."""
    return resolve_tracking_uri(None, absolute_storage(None))
