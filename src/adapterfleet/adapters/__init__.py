"""Bottleneck adapters (Houlsby et al., 2019) in Pfeiffer or Houlsby placement on HF encoders.

Names are imported lazily, so ``import adapterfleet.adapters.config`` (the settings and
`DEFAULT_REDUCTION_FACTOR`) loads no torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from adapterfleet._lazy import lazy_exports

if TYPE_CHECKING:
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

_WHERE = {
    "SLOT_MAPS": "architectures",
    "UnsupportedModelError": "architectures",
    "MINILM": "base_model",
    "BaseModelError": "base_model",
    "load_encoder": "base_model",
    "load_tokenizer": "base_model",
    "resolve_base_model": "base_model",
    "AdapterConfig": "config",
    "WeightsFileError": "files",
    "sha256_file": "files",
    "AdapterModel": "heads",
    "HeadConfig": "heads",
    "ADAPTER_CONFIG": "io",
    "ADAPTER_WEIGHTS": "io",
    "HEAD_CONFIG": "io",
    "HEAD_WEIGHTS": "io",
    "load_adapter": "io",
    "load_head": "io",
    "read_adapter_config": "io",
    "save_adapter": "io",
    "save_head": "io",
    "adapter_configs": "model",
    "adapter_modules": "model",
    "adapter_parameters": "model",
    "add_adapter": "model",
    "base_state_dict": "model",
    "delete_adapter": "model",
    "freeze": "model",
    "save_base_model": "model",
    "set_active_adapter": "model",
    "train_adapter": "model",
}
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

__getattr__, __dir__ = lazy_exports(__name__, globals(), _WHERE)
