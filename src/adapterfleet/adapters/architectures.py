"""Where adapters go in each model family: a slot map, data not subclasses.

A family is placed by five dotted paths and one fact, whether its layers are post-norm (BERT:
`LN(h + r)` after each sub-layer) or pre-norm (GPT-2, Llama: `r + h` with the norm before the
sub-layer). The built-in table covers the families below; any other model works through a layout
declared in the config (`base_model_layout:`), attached to the loaded encoder.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from torch import nn

from adapterfleet.adapters.config import HEAD_DROPOUT
from adapterfleet.errors import UserError

_LAYOUT_ATTR = "_adapterfleet_slot_map"


@dataclass(frozen=True)
class SlotMap:
    """Dotted paths of one family, relative to the base model (`layers`) and to each layer.

    `*_output` names the module whose output is a sub-layer's result `h` before the residual add.
    `*_norm` names, post-norm, the LayerNorm that receives `h + r` after the sub-layer; pre-norm,
    the norm that receives the residual stream `r` before it (its input is what we read).
    `attention_adapter_input`, when set, names a module whose input the Houlsby attention adapter
    reads instead of `h` (ALBERT, as AdapterHub 1.3 computes it: the layer's input).
    `positions_from_mask`: a decoder with absolute position embeddings (GPT-2), whose position
    ids the model counts over the real tokens, so left and right padding read the same.
    """

    layers: str
    attention_output: str
    attention_norm: str
    ffn_output: str
    ffn_norm: str
    pre_norm: bool = False
    dropout_attr: str = "attention_probs_dropout_prob"
    pooling: str = "cls"
    attention_adapter_input: str = ""
    positions_from_mask: bool = False

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any], model_type: object = None) -> SlotMap:
        """A declared layout of a model of `model_type`: the heads of a decoder
        (`causal_type`) pool its last token unless the layout says otherwise."""
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in raw.items() if k in known}
        if "norm" in raw:
            values["pre_norm"] = raw["norm"] == "pre"
        if "pooling" not in raw and causal_type(model_type):
            values["pooling"] = "last"
        return cls(**values)

    def paths(self) -> dict[str, str]:
        return {
            "attention_output": self.attention_output,
            "attention_norm": self.attention_norm,
            "ffn_output": self.ffn_output,
            "ffn_norm": self.ffn_norm,
        }


_BERT_LIKE = SlotMap(
    layers="encoder.layer",
    attention_output="attention.output.dropout",
    attention_norm="attention.output.LayerNorm",
    ffn_output="output.dropout",
    ffn_norm="output.LayerNorm",
)
_LLAMA_LIKE = SlotMap(
    layers="layers",
    attention_output="self_attn",
    attention_norm="input_layernorm",
    ffn_output="mlp",
    ffn_norm="post_attention_layernorm",
    pre_norm=True,
    dropout_attr="attention_dropout",
    pooling="last",
)
# Gemma 2/3 norm each sub-layer's output too: `h` is what the post-norms give.
_GEMMA2_LIKE = SlotMap(
    layers="layers",
    attention_output="post_attention_layernorm",
    attention_norm="input_layernorm",
    ffn_output="post_feedforward_layernorm",
    ffn_norm="pre_feedforward_layernorm",
    pre_norm=True,
    dropout_attr="attention_dropout",
    pooling="last",
)

SLOT_MAPS: dict[str, SlotMap] = {
    "bert": _BERT_LIKE,
    "roberta": _BERT_LIKE,
    "xlm-roberta": _BERT_LIKE,
    "electra": _BERT_LIKE,
    "deberta": _BERT_LIKE,
    "deberta-v2": _BERT_LIKE,
    "distilbert": SlotMap(
        layers="transformer.layer",
        attention_output="attention",
        attention_norm="sa_layer_norm",
        ffn_output="ffn",
        ffn_norm="output_layer_norm",
        dropout_attr="attention_dropout",
    ),
    # ALBERT's twelve layers run one shared layer: its adapter is shared too, as AdapterHub does.
    "albert": SlotMap(
        layers="encoder.albert_layer_groups.0.albert_layers",
        attention_output="attention.output_dropout",
        attention_norm="attention.LayerNorm",
        ffn_output="ffn_output",
        ffn_norm="full_layer_layer_norm",
        attention_adapter_input="attention.query",
    ),
    "modernbert": SlotMap(
        layers="layers",
        attention_output="attn",
        attention_norm="attn_norm",
        ffn_output="mlp",
        ffn_norm="mlp_norm",
        pre_norm=True,
        dropout_attr="attention_dropout",
    ),
    "gpt2": SlotMap(
        layers="h",
        attention_output="attn",
        attention_norm="ln_1",
        ffn_output="mlp",
        ffn_norm="ln_2",
        pre_norm=True,
        dropout_attr="attn_pdrop",
        pooling="last",
        positions_from_mask=True,
    ),
    "llama": _LLAMA_LIKE,
    "mistral": _LLAMA_LIKE,
    "qwen2": _LLAMA_LIKE,
    "qwen3": _LLAMA_LIKE,
    "gemma": _LLAMA_LIKE,
    "gemma2": _GEMMA2_LIKE,
    "gemma3_text": _GEMMA2_LIKE,
}
DECODER_TYPES = frozenset(t for t, s in SLOT_MAPS.items() if s.pooling == "last")


class UnsupportedModelError(UserError, ValueError):
    """The model family has no slot map, built in or declared."""


def unsupported_message(model_type: object) -> str:
    return (
        f"model type {model_type!r} has no built-in layout; adapterfleet knows "
        f"{', '.join(sorted(SLOT_MAPS))}. For any other model, declare where its layers are "
        "under base_model_layout: in the config (layers, attention_output, attention_norm, "
        "ffn_output, ffn_norm, norm: pre|post; see the README's model families)"
    )


def base_encoder(model: nn.Module) -> nn.Module:
    """The bare encoder inside `model` (an AdapterModel, a task model, or the encoder itself)."""
    inner = getattr(model, "encoder_model", None)
    if isinstance(inner, nn.Module):
        return base_encoder(inner)
    base = getattr(model, "base_model", None)
    if isinstance(base, nn.Module) and base is not model:
        return base
    return model


def attach_slot_map(encoder: nn.Module, slots: SlotMap) -> None:
    """Use `slots` for `encoder` (a declared layout), in place of the built-in table's entry."""
    setattr(base_encoder(encoder), _LAYOUT_ATTR, slots)


def declared_slot_map(model: nn.Module) -> SlotMap | None:
    """The layout declared for `model`'s encoder (`base_model_layout:`), if any."""
    declared = getattr(base_encoder(model), _LAYOUT_ATTR, None)
    return declared if isinstance(declared, SlotMap) else None


def slot_map_for(model: nn.Module) -> SlotMap:
    encoder = base_encoder(model)
    declared = declared_slot_map(encoder)
    if declared is not None:
        return declared
    model_type = getattr(getattr(encoder, "config", None), "model_type", None)
    if model_type not in SLOT_MAPS:
        raise UnsupportedModelError(unsupported_message(model_type))
    return SLOT_MAPS[model_type]


def encoder_layers(model: nn.Module) -> nn.ModuleList:
    return base_encoder(model).get_submodule(slot_map_for(model).layers)


def default_pooling(model: nn.Module) -> str:
    """What the family's own sequence-classification model pools: the first token for BERT-like
    encoders (ModernBERT: its `classifier_pooling`), the last real token for decoders."""
    config = base_encoder(model).config
    if getattr(config, "model_type", None) == "modernbert":
        return str(getattr(config, "classifier_pooling", "cls") or "cls")
    return slot_map_for(model).pooling


def is_decoder(model: nn.Module) -> bool:
    """Whether `model` is a decoder: its family's (or declared layout's) heads pool the last
    real token, as a causal model's earlier tokens see none after them, or transformers
    knows its type as a causal model only (`causal_type`)."""
    model_type = getattr(getattr(base_encoder(model), "config", None), "model_type", None)
    return slot_map_for(model).pooling == "last" or causal_type(model_type)


def causal_type(model_type: object) -> bool:
    """Whether `model_type` is a decoder: a built-in one, or one transformers has a causal
    language model of and no masked one (GPT-NeoX, Falcon, OPT; BERT-like encoders have
    both). A layout declared for it without `pooling` got the first token: a head that
    never learned, without a word."""
    if model_type in DECODER_TYPES:
        return True
    from transformers.models.auto.modeling_auto import (
        MODEL_FOR_CAUSAL_LM_MAPPING_NAMES as CAUSAL,
    )
    from transformers.models.auto.modeling_auto import (
        MODEL_FOR_MASKED_LM_MAPPING_NAMES as MASKED,
    )

    return model_type in CAUSAL and model_type not in MASKED


def first_token_on_decoder(where: str, model_type: object) -> str:
    """Why `cls` pooling is refused on a decoder (the config check and `add_head` both say it):
    a causal model's first token attends to itself alone (a start token, the same in every
    row), so the head would give every input one prediction."""
    return (
        f"{where}pooling: cls pools the first token, which in a decoder ({model_type}) sees no "
        "other token, so every input would get one prediction; use last (the decoder's "
        "default: leave pooling out) or mean"
    )


def default_head_dropout(model: nn.Module) -> float:
    """The dropout of a new head: the base model's classifier dropout, else its hidden dropout
    (what transformers' sequence-classification heads take), else the reference's 0.1. A base
    configured without dropout so trains a head without it too."""
    config = base_encoder(model).config
    for name in ("classifier_dropout", "hidden_dropout_prob"):
        value = getattr(config, name, None)
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
    return HEAD_DROPOUT


def describe_base(model: nn.Module) -> dict[str, object]:
    """What an adapter file records about the model it was trained on."""
    config = base_encoder(model).config
    return {
        "model_type": config.model_type,
        "hidden_size": int(config.hidden_size),
        "num_hidden_layers": int(config.num_hidden_layers),
        "name_or_path": str(getattr(config, "_name_or_path", "") or ""),
    }


def attention_dropout(model: nn.Module) -> float:
    config = base_encoder(model).config
    return float(getattr(config, slot_map_for(model).dropout_attr, 0.0) or 0.0)


def layout_problem(encoder: nn.Module, slots: SlotMap) -> tuple[str, str] | None:
    """(field, problem) for the first path of `slots` that `encoder` does not have, else None."""
    try:
        layers = encoder.get_submodule(slots.layers)
    except AttributeError:
        return "layers", f"{slots.layers!r} is not a module of the model{_children(encoder)}"
    if not isinstance(layers, nn.ModuleList) or len(layers) == 0:
        return "layers", f"{slots.layers!r} is a {type(layers).__name__}, not a list of layers"
    for field, path in slots.paths().items():
        try:
            layers[0].get_submodule(path)
        except AttributeError:
            return field, f"{path!r} is not a module of a layer{_children(layers[0])}"
    return None


def _children(module: nn.Module) -> str:
    names = [name for name, _ in module.named_modules() if name and name.count(".") < 2]
    return f" (modules there: {', '.join(names[:24])})" if names else ""


def skeleton(model_config: Any) -> nn.Module:
    """The bare model of `model_config` on the meta device: its module tree, no memory."""
    import torch
    from transformers import AutoModel

    with torch.device("meta"):
        return AutoModel.from_config(model_config)
