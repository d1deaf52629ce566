"""AdapterFusion (Pfeiffer et al., 2021): per layer and token, a learned mix of frozen adapters.

Names are imported lazily, so ``import adapterfleet.fusion`` (or its `config`) loads no torch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from adapterfleet._lazy import lazy_exports

if TYPE_CHECKING:
    from adapterfleet.fusion.analysis import (
        mean_fusion_weights,
        plot_fusion_heatmap,
        write_fusion_weights,
    )
    from adapterfleet.fusion.config import FusionConfig
    from adapterfleet.fusion.io import (
        FUSION_CONFIG,
        FUSION_WEIGHTS,
        load_fusion,
        read_fusion_config,
        save_fusion,
    )
    from adapterfleet.fusion.layer import FusionLayer, reference_fusion
    from adapterfleet.fusion.model import (
        add_fusion,
        capture_fusion_weights,
        delete_fusion,
        fusion_layers,
        fusion_parameters,
        fusion_regularization_loss,
        fusion_setups,
        set_active_fusion,
        train_fusion,
    )

_WHERE = {
    "mean_fusion_weights": "analysis",
    "plot_fusion_heatmap": "analysis",
    "write_fusion_weights": "analysis",
    "FusionConfig": "config",
    "FUSION_CONFIG": "io",
    "FUSION_WEIGHTS": "io",
    "load_fusion": "io",
    "read_fusion_config": "io",
    "save_fusion": "io",
    "FusionLayer": "layer",
    "reference_fusion": "layer",
    "add_fusion": "model",
    "capture_fusion_weights": "model",
    "delete_fusion": "model",
    "fusion_layers": "model",
    "fusion_parameters": "model",
    "fusion_regularization_loss": "model",
    "fusion_setups": "model",
    "set_active_fusion": "model",
    "train_fusion": "model",
}

__all__ = [
    "FUSION_CONFIG",
    "FUSION_WEIGHTS",
    "FusionConfig",
    "FusionLayer",
    "add_fusion",
    "capture_fusion_weights",
    "delete_fusion",
    "fusion_layers",
    "fusion_parameters",
    "fusion_regularization_loss",
    "fusion_setups",
    "load_fusion",
    "mean_fusion_weights",
    "plot_fusion_heatmap",
    "read_fusion_config",
    "reference_fusion",
    "save_fusion",
    "set_active_fusion",
    "train_fusion",
    "write_fusion_weights",
]

__getattr__, __dir__ = lazy_exports(__name__, globals(), _WHERE)
