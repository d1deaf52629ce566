"""Model naming and the `ModelVersionInfo` record returned by this package."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from adapterfleet._hashing import sha256_file  # noqa: F401 - re-exported
from adapterfleet.registry.tags import TAG_ARTIFACT_PATH, TAG_SHA256, TAG_SWEEP, TAG_WEIGHTS_FILE

KINDS: tuple[str, ...] = ("adapter", "fusion")
_NAME_PART = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")
_MODEL_NAME = re.compile(r"^(?P<prefix>.+?)\.(?P<kind>adapter|fusion)\.(?P<task>.+)$")


def _part(label: str, value: str) -> str:
    if not _NAME_PART.match(value):
        raise ValueError(
            f"{label} {value!r} must start with a letter or digit and use only letters, "
            "digits, '_', '-' and '.'"
        )
    return value


def model_name(prefix: str, kind: str, task: str) -> str:
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    return f"{_part('prefix', prefix)}.{kind}.{_part('task', task)}"


def made_by(tags: Mapping[str, str], pipeline: str) -> str | None:
    """The pipeline that registered a version (its sweep's name, `<pipeline>-<hash>-<time>`,
    tag `adapterfleet.sweep`), when it is another than `pipeline`; else None (this one, or a
    version that does not say: an import, a fusion)."""
    parts = tags.get(TAG_SWEEP, "").rsplit("-", 2)
    return parts[0] if len(parts) == 3 and parts[0] not in ("", pipeline) else None


def adapter_model_name(prefix: str, task: str) -> str:
    """`<prefix>.adapter.<task>`"""
    return model_name(prefix, "adapter", task)


def fusion_model_name(prefix: str, target: str) -> str:
    """`<prefix>.fusion.<target>`"""
    return model_name(prefix, "fusion", target)


def parse_model_name(name: str) -> tuple[str, str, str] | None:
    """(prefix, kind, task) of an adapterfleet model name, None for other names."""
    match = _MODEL_NAME.match(name)
    return (match["prefix"], match["kind"], match["task"]) if match else None


def version_with_aliases(version: int, aliases: Sequence[str] = ()) -> str:
    """`v2 (@best @pruned-2)`, `v3` without aliases: a version as a command's line says it."""
    return f"v{version}" + (f" ({' '.join('@' + a for a in aliases)})" if aliases else "")


@dataclass(frozen=True)
class ModelVersionInfo:
    """One registered model version, as plain data (no MLflow objects)."""

    name: str
    version: int
    source: str
    run_id: str | None
    aliases: tuple[str, ...] = ()
    tags: dict[str, str] = field(default_factory=dict, repr=False)  # a notebook shows names
    created_ms: int | None = None

    @property
    def kind(self) -> str | None:
        parsed = parse_model_name(self.name)
        return parsed[1] if parsed else None

    @property
    def task(self) -> str | None:
        parsed = parse_model_name(self.name)
        return parsed[2] if parsed else None

    @property
    def label(self) -> str:
        """`v2 (@pruned-2)`"""
        return version_with_aliases(self.version, self.aliases)

    @property
    def sha256(self) -> str | None:
        return self.tags.get(TAG_SHA256)

    @property
    def weights_file(self) -> str | None:
        return self.tags.get(TAG_WEIGHTS_FILE)

    @property
    def fused(self) -> dict[str, int]:
        """A fusion's adapters, task -> version, from its `adapter.<task>=vN` tags; empty for
        an adapter (or a fusion registered without them)."""
        out: dict[str, int] = {}
        for key, value in self.tags.items():
            if key.startswith("adapter.") and value.startswith("v") and value[1:].isdigit():
                out[key.removeprefix("adapter.")] = int(value[1:])
        return out

    @property
    def artifact_path(self) -> str | None:
        if TAG_ARTIFACT_PATH in self.tags:
            return self.tags[TAG_ARTIFACT_PATH]
        if self.run_id and self.source.startswith(f"runs:/{self.run_id}/"):
            return self.source[len(f"runs:/{self.run_id}/") :]
        return None


def info_from_mlflow(
    mv: Any, aliases: tuple[str, ...] | list[str] | None = None
) -> ModelVersionInfo:
    """Convert an `mlflow.entities.model_registry.ModelVersion`."""
    return ModelVersionInfo(
        name=str(mv.name),
        version=int(mv.version),
        source=str(mv.source or ""),
        run_id=mv.run_id or None,
        aliases=tuple(sorted(aliases if aliases is not None else (mv.aliases or []))),
        tags={str(k): str(v) for k, v in (mv.tags or {}).items()},
        created_ms=int(mv.creation_timestamp) if mv.creation_timestamp is not None else None,
    )
