"""The one place that knows how adapterfleet's parameter names map to the reference's.

Used by the agreement check only (the same weights loaded into both implementations).
"""

from __future__ import annotations

import re

FUSION_NAME = "fusion"
HEAD_NAME = "h"

_LAYER = r"encoder_model\.encoder\.layer\.(\d+)\.output\.LayerNorm\."
_ADAPTER = re.compile(_LAYER + r"adapters\.([\w-]+)\.adapter_(down|up)\.(weight|bias)$")
_FUSION = re.compile(_LAYER + r"fusions\.([\w-]+)\.(query|key|value)\.(weight|bias)$")
_HEAD = re.compile(r"heads\.([\w-]+)\.layers\.(\d+)\.(weight|bias)$")
_REF_ADDED = re.compile(r"\.adapters\.|\.adapter_fusion_layer\.|^heads\.")


def adapter_names(n: int) -> list[str]:
    return [f"a{i}" for i in range(n)]


def reference_fusion_name(names: list[str]) -> str:
    """The reference names a fusion after its adapters, comma-separated."""
    return ",".join(names)


def to_reference(name: str, fused: list[str]) -> str | None:
    """The reference's name for one of our adapter, fusion or head parameters (None: a base
    weight, which both sides load from the same folder)."""
    if m := _ADAPTER.match(name):
        layer, adapter, which, kind = m.groups()
        index = ".0" if which == "down" else ""  # the reference's down is Sequential(Linear, act)
        return f"bert.encoder.layer.{layer}.output.adapters.{adapter}.adapter_{which}{index}.{kind}"
    if m := _FUSION.match(name):
        layer, _, proj, kind = m.groups()
        fusion = reference_fusion_name(fused)
        return f"bert.encoder.layer.{layer}.output.adapter_fusion_layer.{fusion}.{proj}.{kind}"
    if m := _HEAD.match(name):
        head, index, kind = m.groups()
        return f"heads.{head}.{index}.{kind}"
    return None


def is_reference_added(name: str) -> bool:
    """A reference parameter that belongs to an adapter, a fusion or a head."""
    return bool(_REF_ADDED.search(name))
