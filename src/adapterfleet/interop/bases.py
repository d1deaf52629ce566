"""Whether a reference folder fits the model it is imported into, and what the reference's model
class of a family pools."""

from __future__ import annotations

from torch import nn

from adapterfleet.adapters.architectures import encoder_layers, slot_map_for
from adapterfleet.adapters.files import WeightsFileError, check_base
from adapterfleet.interop import reference as ref
from adapterfleet.interop.folders import Saved
from adapterfleet.interop.reference import InteropError, Layout


def reference_pooling(model: nn.Module) -> str:
    """What the reference's model class of this family pools: decoders their last token."""
    return "last" if slot_map_for(model).pooling == "last" else "cls"


def check_reference_base(saved: Saved, model: nn.Module, layout: Layout) -> None:
    recorded = {
        "model_type": saved.meta.get("model_type"),
        "hidden_size": saved.meta.get("hidden_size"),
    }
    try:
        check_base({k: v for k, v in recorded.items() if v is not None}, model, saved.where)
    except WeightsFileError as error:
        raise InteropError(str(error)) from None
    keys = [ref.normalized_key(k, layout) for k in saved.tensors]
    layers, expected = ref.layers_in(keys, layout), len(encoder_layers(model))
    if layers and layers != expected:  # ALBERT: one shared layer holds the adapters of all
        raise InteropError(
            f"{saved.where} holds modules for {layers} layers, but this model has {expected} "
            "adapter layers; load it into a matching base model"
        )
