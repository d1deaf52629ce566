"""AdapterFusion configuration and its two presets from the paper."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from adapterfleet.errors import unknown_keys


@dataclass(frozen=True)
class FusionConfig:
    """Which projections the fusion attention has, its temperature and the V regulariser.

    `dynamic` (the paper's default): query, key and value, V initialised to the identity and
    pulled towards it by `regularization_lambda · ‖I − V‖²`. `static`: query and key only.
    `dropout` on the scores defaults to the base model's attention dropout.
    """

    query: bool = True
    key: bool = True
    value: bool = True
    temperature: float = 1.0
    regularization: bool = True
    regularization_lambda: float = 0.01
    dropout: float | None = None

    def __post_init__(self) -> None:
        for name in ("query", "key", "value", "regularization"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(
                    f"fusion {name} must be true or false, got {getattr(self, name)!r}"
                )
        for name in ("temperature", "regularization_lambda", "dropout"):
            value = getattr(self, name)
            if not _is_number(value) and not (name == "dropout" and value is None):
                raise ValueError(f"fusion {name} must be a number, got {value!r}")
        if self.regularization_lambda < 0:
            raise ValueError(
                f"fusion regularization_lambda must be >= 0, got {self.regularization_lambda}"
            )
        if self.temperature <= 0:
            raise ValueError(f"fusion temperature must be > 0, got {self.temperature}")
        if self.regularization and not self.value:
            raise ValueError("fusion regularization needs value=True (it pulls V towards I)")
        if self.dropout is not None and not 0.0 <= self.dropout < 1.0:
            raise ValueError(f"fusion dropout must be in [0, 1), got {self.dropout}")

    @classmethod
    def preset(cls, name: str) -> FusionConfig:
        presets = {"dynamic": cls(), "static": cls(value=False, regularization=False)}
        if name not in presets:
            raise ValueError(f"fusion preset {name!r} is unknown; use one of {sorted(presets)}")
        return presets[name]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FusionConfig:
        allowed = set(cls.__dataclass_fields__)
        unknown = sorted(set(data) - allowed)
        if unknown:
            raise ValueError(f"fusion config: {unknown_keys(unknown, sorted(allowed))}")
        return cls(**data)


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
