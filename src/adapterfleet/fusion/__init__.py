"""AdapterFusion (Pfeiffer et al., 2021): per layer and token, a learned mix of frozen adapters."""

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
