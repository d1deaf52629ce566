"""Where adapters go in each supported encoder family: a slot mapping, data not subclasses."""

from __future__ import annotations

from dataclasses import dataclass

from torch import nn

from adapterfleet.errors import UserError


@dataclass(frozen=True)
class SlotMap:
    """Dotted paths of one encoder family, relative to the base model and to each layer.

    `*_output` names the module whose output is a sub-layer's result `h` before the residual add;
    `*_norm` names the LayerNorm that receives `h + r`.
    """

    layers: str
    attention_output: str
    attention_norm: str
    ffn_output: str
    ffn_norm: str
    dropout_attr: str = "attention_probs_dropout_prob"


_BERT_LIKE = SlotMap(
    layers="encoder.layer",
    attention_output="attention.output.dropout",
    attention_norm="attention.output.LayerNorm",
    ffn_output="output.dropout",
    ffn_norm="output.LayerNorm",
)

SLOT_MAPS: dict[str, SlotMap] = {
    "bert": _BERT_LIKE,
    "roberta": _BERT_LIKE,
    "xlm-roberta": _BERT_LIKE,
    "electra": _BERT_LIKE,
    "distilbert": SlotMap(
        layers="transformer.layer",
        attention_output="attention",
        attention_norm="sa_layer_norm",
        ffn_output="ffn",
        ffn_norm="output_layer_norm",
        dropout_attr="attention_dropout",
    ),
}


class UnsupportedModelError(UserError, ValueError):
    """The encoder family has no slot mapping."""


def base_encoder(model: nn.Module) -> nn.Module:
    """The bare encoder inside `model` (an AdapterModel, a task model, or the encoder itself)."""
    inner = getattr(model, "encoder_model", None)
    if isinstance(inner, nn.Module):
        return base_encoder(inner)
    base = getattr(model, "base_model", None)
    if isinstance(base, nn.Module) and base is not model:
        return base
    return model


def slot_map_for(model: nn.Module) -> SlotMap:
    config = getattr(base_encoder(model), "config", None)
    model_type = getattr(config, "model_type", None)
    if model_type not in SLOT_MAPS:
        raise UnsupportedModelError(
            f"model type {model_type!r} is not supported; adapterfleet supports "
            f"{', '.join(sorted(SLOT_MAPS))}"
        )
    return SLOT_MAPS[model_type]


def encoder_layers(model: nn.Module) -> nn.ModuleList:
    return base_encoder(model).get_submodule(slot_map_for(model).layers)


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
