"""Bottleneck adapter configuration: placement, reduction factor, non-linearity."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from adapterfleet.errors import did_you_mean, unknown_keys

ARCHITECTURES = ("pfeiffer", "houlsby")
NON_LINEARITIES = ("relu", "swish", "gelu", "tanh")
DEFAULT_REDUCTION_FACTOR = 16  # the paper's ST-A setting (Table 1)
HEAD_DROPOUT = 0.1  # the reference implementation's head dropout
_DEFAULT_NON_LINEARITY = {"pfeiffer": "relu", "houlsby": "swish"}


@dataclass(frozen=True)
class AdapterConfig:
    """How a bottleneck adapter is shaped and where it sits in each layer.

    `pfeiffer` puts one adapter after the feed-forward sub-layer; `houlsby` puts one after the
    attention sub-layer and one after the feed-forward sub-layer. The bottleneck width is
    `hidden_size // reduction_factor`.
    """

    architecture: str = "pfeiffer"
    reduction_factor: int = DEFAULT_REDUCTION_FACTOR
    non_linearity: str = field(default="")
    init_std: float = 0.02

    def __post_init__(self) -> None:
        if self.architecture not in ARCHITECTURES:
            raise ValueError(
                f"adapter architecture {self.architecture!r} is unknown; use one of {ARCHITECTURES}"
            )
        if not isinstance(self.reduction_factor, int) or isinstance(self.reduction_factor, bool):
            raise ValueError(
                f"reduction_factor must be a positive integer, got {self.reduction_factor!r}"
            )
        if self.reduction_factor < 1:
            raise ValueError(f"reduction_factor must be >= 1, got {self.reduction_factor}")
        if not self.non_linearity:
            object.__setattr__(self, "non_linearity", _DEFAULT_NON_LINEARITY[self.architecture])
        if self.non_linearity not in NON_LINEARITIES:
            raise ValueError(
                f"non_linearity {self.non_linearity!r} is unknown; use one of {NON_LINEARITIES}"
            )

    @property
    def positions(self) -> tuple[str, ...]:
        """Slots of a layer that hold an adapter, in the reference's vocabulary."""
        if self.architecture == "houlsby":
            return ("mh_adapter", "output_adapter")
        return ("output_adapter",)

    def bottleneck_size(self, hidden_size: int) -> int:
        """Width m of the bottleneck for `hidden_size`; refuses a factor that does not divide it."""
        return bottleneck_size(self.reduction_factor, hidden_size)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> AdapterConfig:
        allowed = {"architecture", "reduction_factor", "non_linearity", "init_std"}
        unknown = sorted(set(data) - allowed)
        if unknown:
            raise ValueError(f"adapter config: {unknown_keys(unknown, sorted(allowed))}")
        return cls(**data)


def bottleneck_size(reduction_factor: int, hidden_size: int) -> int:
    """`hidden_size // reduction_factor`; a ValueError when the factor does not divide it."""
    if reduction_factor > hidden_size or hidden_size % reduction_factor:
        raise ValueError(
            f"reduction_factor {reduction_factor} does not divide the hidden size "
            f"{hidden_size}; choose a divisor of {hidden_size} such as "
            f"{_or(_factors_for(hidden_size))}"
        )
    return hidden_size // reduction_factor


PAPER_REDUCTION_FACTORS = (2, 16, 64)  # the paper's sweep


def _factors_for(hidden_size: int) -> list[int]:
    """Reduction factors that divide `hidden_size`: the paper's where they do, else its
    smallest divisors above 1 (1 for a hidden size with none)."""
    paper = [f for f in PAPER_REDUCTION_FACTORS if hidden_size % f == 0]
    return paper or [f for f in range(2, hidden_size) if hidden_size % f == 0][:3] or [1]


def _or(values: list[int]) -> str:
    head, last = values[:-1], values[-1]
    return f"{', '.join(map(str, head))} or {last}" if head else str(last)


DTYPES = ("auto", "float32", "bfloat16", "float16")
_DTYPE_SHORT = {"bf16": "bfloat16", "fp16": "float16", "half": "float16", "fp32": "float32"}
POOLINGS = ("cls", "mean", "last")  # what a head reads: first, mean or last real token


@dataclass(frozen=True)
class BaseModelSpec:
    """What loading the base needs; `name` alone where a plain string was passed before."""

    name: str
    layout: tuple[tuple[str, Any], ...] = ()  # the declared layout's items, empty when built in
    dtype: str = "auto"
    gradient_checkpointing: bool = False

    def __post_init__(self) -> None:
        if self.dtype not in DTYPES:
            short = _DTYPE_SHORT.get(str(self.dtype).lower())
            hint = f" (did you mean {short!r}?)" if short else did_you_mean([self.dtype], DTYPES)
            raise ValueError(
                f"dtype {self.dtype!r} is unknown{hint}; use one of {', '.join(DTYPES)}"
            )

    @property
    def layout_mapping(self) -> dict[str, Any]:
        return dict(self.layout)

    def __str__(self) -> str:
        return self.name
