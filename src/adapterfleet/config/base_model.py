"""The frozen base model a pipeline adapts: its name, a declared layout, its dtype, checkpointing.

```yaml
base_model: my-org/my-encoder          # the packaged MiniLM, a hub id or a local folder
base_model_dtype: bfloat16             # auto (the checkpoint's own) | float32 | bfloat16 | float16
gradient_checkpointing: true           # recompute the base's activations in backward
base_model_layout:                     # only for a model type without a built-in layout
  layers: encoder.blocks               # the layer list, from the bare model (AutoModel)
  attention_output: attn.out           # each from a layer: the attention sub-layer's output h
  attention_norm: attn_norm
  ffn_output: mlp                      # the feed-forward sub-layer's output h
  ffn_norm: mlp_norm                   # post-norm: the norm taking h + r; pre-norm: the one before
  norm: pre                            # pre | post
  pooling: last                        # cls | mean | last: the heads' default
  positions_from_mask: true            # absolute positions counted over the real tokens
```
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from adapterfleet.adapters.config import DTYPES, POOLINGS, BaseModelSpec
from adapterfleet.config.fields import ConfigError, as_mapping, choice, refuse_unknown

LAYOUT_PATHS = ("layers", "attention_output", "attention_norm", "ffn_output", "ffn_norm")
LAYOUT_KEYS = (*LAYOUT_PATHS, "norm", "pooling", "dropout_attr", "positions_from_mask")


def parse_layout(raw: Any, where: str = "base_model_layout") -> tuple[tuple[str, Any], ...]:
    """A declared layout's items, each path a dotted string; `norm` pre or post (required)."""
    if raw is None:
        return ()
    layout = as_mapping(raw, where)
    refuse_unknown(layout, LAYOUT_KEYS, where)
    missing = [key for key in (*LAYOUT_PATHS, "norm") if key not in layout]
    if missing:
        raise ConfigError(
            f"{where}: {', '.join(missing)} missing; a layout names {', '.join(LAYOUT_PATHS)} "
            "(dotted module paths) and norm: pre|post"
        )
    for key in (*LAYOUT_PATHS, "dropout_attr"):
        value = layout.get(key, "x")
        if not isinstance(value, str) or not value or any(not p for p in value.split(".")):
            raise ConfigError(f"{where}.{key}: {value!r} must be a dotted module path, e.g. mlp")
    choice(layout["norm"], ("pre", "post"), f"{where}.norm")
    if "pooling" in layout:
        choice(layout["pooling"], POOLINGS, f"{where}.pooling")
    if not isinstance(layout.get("positions_from_mask", False), bool):
        value = layout["positions_from_mask"]
        raise ConfigError(f"{where}.positions_from_mask: {value!r} must be true or false")
    return tuple(sorted(layout.items()))


def parse_base_model(document: Mapping[str, Any], name: str) -> BaseModelSpec:
    checkpointing = document.get("gradient_checkpointing", False)
    if not isinstance(checkpointing, bool):
        raise ConfigError(f"gradient_checkpointing: {checkpointing!r} must be true or false")
    return BaseModelSpec(
        name=name,
        layout=parse_layout(document.get("base_model_layout")),
        dtype=choice(document.get("base_model_dtype", "auto"), DTYPES, "base_model_dtype"),
        gradient_checkpointing=checkpointing,
    )
