"""Which adapters a fusion relies on: mean fusion weights per layer, and the paper's Figure 4."""

from __future__ import annotations

import json
import os
import textwrap
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from adapterfleet.fusion.model import capture_fusion_weights, fusion_active, fusion_setups


@torch.no_grad()
def mean_fusion_weights(
    model: nn.Module, name: str, batches: Iterable[dict[str, Any]]
) -> torch.Tensor:
    """Mean weight of each adapter in each layer over the real (unpadded) tokens of `batches`:
    a (layers, adapters) tensor whose rows sum to 1. The model is left as it was: in its mode,
    with what was active before (`fusion_active`)."""
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    totals: torch.Tensor | None = None
    tokens = 0.0
    try:
        with fusion_active(model, name):
            for batch in batches:
                batch = {k: v.to(device) if torch.is_tensor(v) else v for k, v in batch.items()}
                mask = batch["attention_mask"].reshape(-1).float()
                with capture_fusion_weights(model, name) as captured:
                    model(batch)
                per_layer = torch.stack(
                    [captured[i][0].reshape(mask.numel(), -1).float() for i in sorted(captured)]
                )  # (layers, tokens, N)
                summed = (per_layer * mask[None, :, None]).sum(1)
                totals = summed if totals is None else totals + summed
                tokens += float(mask.sum())
    finally:
        model.train(was_training)
    if totals is None or tokens == 0:
        raise ValueError("mean_fusion_weights needs at least one batch with real tokens")
    return (totals / tokens).cpu()


WEIGHT_LABEL = "mean fusion weight"
AVERAGED = "softmax weight of each adapter, averaged over the dev set's tokens"


def heatmap_figure(
    weights: torch.Tensor, adapter_names: Sequence[str], title: str, target: str | None = None
) -> Any:
    """The matplotlib figure of `weights` (layers × adapters): axes `adapter` and `layer`, the
    colour bar labelled, each cell annotated; the target's own adapter in bold, `(target)`."""
    import matplotlib

    matplotlib.use("Agg")  # before pyplot: no display needed
    from matplotlib import pyplot as plt

    data = weights.numpy()
    width = max(5.0, 1.6 + 0.9 * len(adapter_names))
    fig, ax = plt.subplots(figsize=(width, 2.4 + 0.45 * data.shape[0]))
    image = ax.imshow(data, cmap="viridis", vmin=0.0, vmax=max(float(data.max()), 1e-6))
    names = [f"{n} (target)" if n == target else str(n) for n in adapter_names]
    ax.set_xticks(range(len(names)), labels=names, rotation=45, ha="right")
    for label, name in zip(ax.get_xticklabels(), adapter_names, strict=True):
        label.set_fontweight("bold" if name == target else "normal")
    ax.set_yticks(range(data.shape[0]), labels=[f"layer {i + 1}" for i in range(data.shape[0])])
    ax.set_xlabel("adapter")
    ax.set_ylabel("layer")
    for (row, col), value in np.ndenumerate(data):
        shade = "white" if value < 0.6 * data.max() else "black"
        ax.text(col, row, f"{value:.2f}", ha="center", va="center", fontsize=7, color=shade)
    wrapped = [textwrap.fill(line, int(width * 8)) for line in title.splitlines()]
    ax.set_title("\n".join(wrapped), fontsize=9)  # wrapped to the figure's width
    fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04, label=WEIGHT_LABEL)
    fig.tight_layout()
    return fig


def plot_fusion_heatmap(
    weights: torch.Tensor,
    adapter_names: Sequence[str],
    path: str | os.PathLike[str],
    title: str,
    target: str | None = None,
) -> Path:
    """Save `heatmap_figure` of `weights` (layers × adapters) as a PNG."""
    fig = heatmap_figure(weights, adapter_names, title, target)
    from matplotlib import pyplot as plt

    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out


def heatmap_title(target: str) -> str:
    return f"Fusion for {target}: mean fusion weight per layer\n({AVERAGED})"


def write_fusion_weights(
    model: nn.Module, target: str, sources: list[str], dev: Iterable[dict[str, Any]], folder: Path
) -> None:
    """The mean fusion weight per layer and adapter on the dev set (the paper's Figure 4 for
    `target`): `fusion_weights.json` (`adapters`, `weights[layer][adapter]`) and a heatmap."""
    weights = mean_fusion_weights(model, target, dev)
    path = folder / "fusion_weights.png"
    plot_fusion_heatmap(weights, sources, path, heatmap_title(target), target=target)
    (folder / "fusion_weights.json").write_text(
        json.dumps({"adapters": sources, "weights": weights.tolist()}, indent=1)
    )


def fused_adapter_names(model: nn.Module, name: str) -> list[str]:
    return list(fusion_setups(model)[name].adapter_names)
