"""Bottleneck adapters (Houlsby et al., 2019) in Pfeiffer or Houlsby placement on HF encoders."""

from adapterfleet.adapters.architectures import SLOT_MAPS, UnsupportedModelError
from adapterfleet.adapters.base_model import (
    MINILM,
    BaseModelError,
    load_encoder,
    load_tokenizer,
    resolve_base_model,
)
from adapterfleet.adapters.config import AdapterConfig
from adapterfleet.adapters.files import WeightsFileError, sha256_file
from adapterfleet.adapters.heads import AdapterModel, HeadConfig
from adapterfleet.adapters.io import (
    ADAPTER_CONFIG,
    ADAPTER_WEIGHTS,
    HEAD_CONFIG,
    HEAD_WEIGHTS,
    load_adapter,
    load_head,
    read_adapter_config,
    save_adapter,
    save_head,
)
from adapterfleet.adapters.model import (
    adapter_configs,
    adapter_modules,
    adapter_parameters,
    add_adapter,
    base_state_dict,
    delete_adapter,
    freeze,
    save_base_model,
    set_active_adapter,
    train_adapter,
)

__all__ = [
    "ADAPTER_CONFIG",
    "ADAPTER_WEIGHTS",
    "HEAD_CONFIG",
    "HEAD_WEIGHTS",
    "MINILM",
    "SLOT_MAPS",
    "AdapterConfig",
    "AdapterModel",
    "BaseModelError",
    "HeadConfig",
    "UnsupportedModelError",
    "WeightsFileError",
    "adapter_configs",
    "adapter_modules",
    "adapter_parameters",
    "add_adapter",
    "base_state_dict",
    "delete_adapter",
    "freeze",
    "load_adapter",
    "load_encoder",
    "load_head",
    "load_tokenizer",
    "read_adapter_config",
    "resolve_base_model",
    "save_adapter",
    "save_base_model",
    "save_head",
    "set_active_adapter",
    "sha256_file",
    "train_adapter",
]
