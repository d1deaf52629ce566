"""Our parameter names for the agreement check, and the reference's for the same parameters.

Which name the reference gives each parameter is `adapterfleet.interop.reference`'s knowledge;
`to_reference` only parses our names and asks it. This module is imported by the reference's
worker too, in the reference's venv where adapterfleet is not installed: so adapterfleet is
imported inside `to_reference` (called by our worker only), never at module level.
"""

from __future__ import annotations

import re

FUSION_NAME = "fusion"
HEAD_NAME = "h"

_LAYER = r"encoder_model\.encoder\.layer\.(\d+)\.output\.LayerNorm\."
_ADAPTER = re.compile(_LAYER + r"adapters\.([\w-]+)\.(adapter_(?:down|up)\.(?:weight|bias))$")
_FUSION = re.compile(_LAYER + r"fusions\.([\w-]+)\.((?:query|key|value)\.(?:weight|bias))$")
_HEAD = re.compile(r"heads\.([\w-]+)\.layers\.(\d+\.(?:weight|bias))$")
# Run in the reference's venv (no adapterfleet there): the modules the reference adds, by name.
_REF_ADDED = re.compile(r"\.adapters\.|\.adapter_fusion_layer\.|^heads\.")


def adapter_names(n: int) -> list[str]:
    return [f"a{i}" for i in range(n)]


def to_reference(name: str, fused: list[str]) -> str | None:
    """The reference's name for one of our adapter, fusion or head parameters of the BERT model
    the benchmark builds (None: a base weight, which both sides load from the same folder)."""
    from adapterfleet.interop import reference as ref

    bert = ref.LAYOUTS["bert"]
    if m := _ADAPTER.match(name):
        layer, adapter, param = m.groups()
        return ref.adapter_key(bert, int(layer), "output_adapter", adapter, param)
    if m := _FUSION.match(name):
        layer, _, param = m.groups()
        return ref.fusion_key(bert, int(layer), ref.fusion_name(fused), param)
    if m := _HEAD.match(name):
        head, param = m.groups()
        return ref.head_key(head, param)
    return None


def is_reference_added(name: str) -> bool:
    """A reference parameter that belongs to an adapter, a fusion or a head."""
    return bool(_REF_ADDED.search(name))
