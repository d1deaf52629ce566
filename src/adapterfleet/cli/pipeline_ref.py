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
    """The pipeline a command means; a NAME that is not the config's is refused. A config file
    given where NAME goes (as `run`, `tasks` and `clean` take it) is the config: a pipeline's
    name has no `.` or `/`, and it was looked up as a name (`nothing was tracked there`)."""
    if config is None and name is not None and ("." in name or "/" in name):
        config, name = Path(name), None
    if config is not None:
        cfg = load(config, overrides, budget)
        if name is not None and name != cfg.name:
            raise ConfigError(f"{name!r} is not the name of {config} ({cfg.name!r})")
        return PipelineRef(cfg.name, _given(tracking_uri) or cfg.tracking_uri, cfg)
    if name is None:
        raise ConfigError("give the pipeline NAME or its config with -c CONFIG")
    if budget:
        raise ConfigError(f"--budget {budget}: a budget is a section of a config; give -c CONFIG")
    store = _store_overrides(overrides or [])
    uri = store.get("tracking_uri")
    if uri is not None and not isinstance(uri, str):
        raise ConfigError(f"tracking_uri: expected a URI (http://..., sqlite:///...), got {uri!r}")
    given = _given(tracking_uri) or _given(uri)
    if given is None and "storage" in store:
        given = resolve_tracking_uri(None, absolute_storage(store["storage"]))
    return PipelineRef(name, given or default_uri())


def _store_overrides(overrides: list[str]) -> dict[str, Any]:
    """With NAME and no config, `-o storage=...` and `-o tracking_uri=...` name the store (as
    the store errors suggest); any other key needs the config it would change."""
    from adapterfleet.config.document import apply_overrides

    values = apply_overrides({}, overrides)
    other = sorted(set(values) - {"storage", "tracking_uri"}, key=str)
    if other:
        raise ConfigError(
            f"-o {other[0]}: without -c CONFIG only -o storage=... and -o tracking_uri=... "
            "apply (they name the store); give -c CONFIG to change other keys"
        )
    return values


def _given(tracking_uri: str | None) -> str | None:
    """`--tracking-uri`, its login moved to MLflow's variables as for a config's own URI."""
    return use_login(tracking_uri, where="--tracking-uri") if tracking_uri else None


def default_uri() -> str:
    """$MLFLOW_TRACKING_URI, else the embedded store of ./adapterfleet-runs."""
    return resolve_tracking_uri(None, absolute_storage(None))
