"""Translating adapter and fusion configs between the reference's JSON and ours.

Importing refuses, in one line naming the field, every setting that would make adapterfleet
compute or train the module differently from the reference; exporting refuses what the
reference cannot express. Settings that only shape initialisation are ignored.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

from adapterfleet.adapters.config import AdapterConfig, bottleneck_size
from adapterfleet.fusion.config import FusionConfig
from adapterfleet.interop import reference as ref
from adapterfleet.interop.reference import InteropError


def _resolve_bn(raw: object, where: str) -> dict[str, Any]:
    """The full bottleneck config a saved `config` value stands for (a name or a dict)."""
    if isinstance(raw, str):
        preset = ref.BN_ALIASES.get(raw, raw)
        if preset not in ref.BN_PRESETS:
            supported = sorted([*ref.BN_PRESETS, *ref.BN_ALIASES])
            raise InteropError(
                f"{where}: config {raw!r} is not supported; adapterfleet imports {supported}"
            )
        return {**ref.BN_DEFAULTS, **ref.BN_PRESETS[preset]}
    if not isinstance(raw, Mapping):
        raise InteropError(f"{where}: config must be a JSON object or a config name, got {raw!r}")
    architecture = raw.get("architecture")
    if architecture is not None:
        raise InteropError(
            f"{where}: config.architecture={architecture!r} is not supported; adapterfleet "
            "imports bottleneck adapters (seq_bn, double_seq_bn)"
        )
    missing = [key for key in ref.BN_REQUIRED if key not in raw]
    if missing:
        raise InteropError(f"{where}: config lacks {missing}, which the reference requires")
    return {**ref.BN_DEFAULTS, **raw}


def _preset_of(config: Mapping[str, Any], where: str) -> str:
    slots = (bool(config["mh_adapter"]), bool(config["output_adapter"]))
    for preset, values in ref.BN_PRESETS.items():
        if slots == (values["mh_adapter"], values["output_adapter"]):
            return preset
    raise InteropError(
        f"{where}: config.mh_adapter={config['mh_adapter']} with "
        f"config.output_adapter={config['output_adapter']} is not supported; adapterfleet "
        "implements seq_bn (output only) and double_seq_bn (both)"
    )


def _check_fields(config: Mapping[str, Any], preset: str, where: str) -> None:
    expected = {**ref.BN_DEFAULTS, **ref.BN_PRESETS[preset]}
    for key, value in config.items():
        if key in ref.BN_IRRELEVANT or key in ("reduction_factor", "non_linearity"):
            continue
        if key not in expected:
            if value in (None, False, [], {}, ""):
                continue  # a switch of a newer reference, off
            raise InteropError(
                f"{where}: config.{key}={value!r} is not a setting adapterfleet knows"
            )
        wanted = expected[key]
        if key == "leave_out" and value is None:
            value = []
        if key == "dropout" and isinstance(value, int | float) and 0 < value < 1:
            warnings.warn(
                f"{where}: config.dropout={value!r} is dropped: it acts in training only, and "
                "adapterfleet uses imported adapters frozen (fusions, predictions: the same "
                "outputs as the reference's in eval mode)",
                stacklevel=2,
            )
            continue
        if value != wanted:
            raise InteropError(
                f"{where}: config.{key}={value!r} is not supported; adapterfleet implements "
                f"{preset} with {key}={wanted!r}"
            )


def _reduction_factor(value: object, hidden_size: int | None, where: str) -> int:
    if isinstance(value, Mapping):
        raise InteropError(
            f"{where}: config.reduction_factor is a per-layer mapping {dict(value)}; "
            "adapterfleet uses one reduction factor for every layer"
        )
    if isinstance(value, bool) or not isinstance(value, int | float) or value != int(value):
        raise InteropError(
            f"{where}: config.reduction_factor={value!r} is not supported; adapterfleet needs a "
            "positive integer"
        )
    factor = int(value)
    try:
        if factor < 1:
            raise ValueError(f"reduction_factor {factor} is not positive")
        if hidden_size is not None:
            bottleneck_size(factor, hidden_size)
    except ValueError as error:
        raise InteropError(f"{where}: config.reduction_factor={value!r}: {error}") from None
    return factor


def _non_linearity(value: object, legacy: bool, where: str) -> str:
    name = str(value).lower()
    if legacy:
        name = ref.LEGACY_ACTIVATIONS.get(name, name)
    if name not in ref.ACTIVATIONS:
        suffix = " (a config without 'version' means gelu_new by 'gelu')" if legacy else ""
        raise InteropError(
            f"{where}: config.non_linearity={value!r} is not supported{suffix}; adapterfleet "
            f"implements {sorted(ref.ACTIVATIONS)}"
        )
    return ref.ACTIVATIONS[name]


def adapter_from_reference(
    raw: object, hidden_size: int | None, where: str, legacy: bool = False
) -> AdapterConfig:
    """Our config for the reference's `config` value, or InteropError naming the field.

    `legacy`: the file has no `version` (older names of activations apply); `hidden_size`, when
    known, is checked to be divisible by the reduction factor."""
    config = _resolve_bn(raw, where)
    preset = _preset_of(config, where)
    _check_fields(config, preset, where)
    return AdapterConfig(
        architecture=ref.PLACEMENT_OF_PRESET[preset],
        reduction_factor=_reduction_factor(config["reduction_factor"], hidden_size, where),
        non_linearity=_non_linearity(config["non_linearity"], legacy, where),
    )


def adapter_to_reference(config: AdapterConfig) -> dict[str, Any]:
    """The full config dict the reference writes for the same adapter."""
    preset = ref.BN_ALIASES[config.architecture]
    return {
        **ref.BN_DEFAULTS,
        **ref.BN_PRESETS[preset],
        "reduction_factor": config.reduction_factor,
        "non_linearity": config.non_linearity,
    }


def fusion_from_reference(raw: object, where: str) -> FusionConfig:
    if isinstance(raw, str):
        if raw not in ref.FUSION_PRESETS:
            raise InteropError(
                f"{where}: fusion config {raw!r} is not supported; use {sorted(ref.FUSION_PRESETS)}"
            )
        raw = {**ref.FUSION_COMMON, **ref.FUSION_PRESETS[raw]}
    if not isinstance(raw, Mapping):
        raise InteropError(f"{where}: config must be a JSON object or a preset name, got {raw!r}")
    missing = [key for key in ref.FUSION_FIELDS if key not in raw]
    if missing:
        raise InteropError(f"{where}: config lacks {missing}, which the reference requires")
    for key in ("query_before_ln", "residual_before", "temperature"):
        if raw[key]:
            raise InteropError(
                f"{where}: config.{key}={raw[key]!r} is not supported; adapterfleet implements "
                f"fusion with {key}=false"
            )
    if not (raw["query"] or raw["key"] or raw["value"]):
        raise InteropError(
            f"{where}: config.query, key and value are all false (the reference's dense-score "
            "fusion); adapterfleet needs at least one of them"
        )
    # value_before_softmax may be either: V has no bias, so V Σ s_n z_n = Σ s_n V z_n.
    dropout = raw["dropout_prob"] or None  # the reference reads 0 as "use the attention rate"
    return FusionConfig(
        query=bool(raw["query"]),
        key=bool(raw["key"]),
        value=bool(raw["value"]),
        regularization=bool(raw["regularization"] and raw["value"]),
        regularization_lambda=ref.FUSION_LAMBDA,
        dropout=None if dropout is None else float(dropout),
    )


def fusion_to_reference(config: FusionConfig, where: str) -> dict[str, Any]:
    if config.temperature != 1.0:
        raise InteropError(
            f"{where}: fusion temperature {config.temperature} cannot be exported; the reference "
            "has T=1 (or an annealed T from 50, which adapterfleet does not implement)"
        )
    if config.regularization and config.regularization_lambda != ref.FUSION_LAMBDA:
        raise InteropError(
            f"{where}: fusion regularization_lambda {config.regularization_lambda} cannot be "
            f"exported; the reference fixes it at {ref.FUSION_LAMBDA}"
        )
    if config.dropout == 0.0:
        raise InteropError(
            f"{where}: fusion dropout 0.0 cannot be exported; the reference reads 0 as 'use the "
            "model's attention dropout'"
        )
    return {
        **ref.FUSION_COMMON,
        "key": config.key,
        "query": config.query,
        "value": config.value,
        "regularization": config.regularization and config.value,
        "value_initialized": config.value,
        "dropout_prob": config.dropout,
    }
