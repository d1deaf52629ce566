"""The paper's Figure 4 from the fusion runs' `fusion_weights.json`: the mean fusion weight of
each adapter (columns) for each fusion target and system (rows), one heatmap per layer and one
for the mean over layers; each row is the mean over its seeds."""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

WEIGHTS_FILE = "fusion_weights.json"
_SYSTEM_NAMES = {"fusion-st-a": "ST-A", "fusion-mt-a": "MT-A"}
_PANELS_PER_ROW = 4
FIGURE4_CAPTION = (
    "Each cell: the mean fusion weight of an adapter (column) in a fusion (row: target and "
    "system), i.e. its softmax weight averaged over the dev set's tokens, per layer (one panel "
    "each) and averaged over layers (last panel); each row is the mean over its seeds. The red "
    "box marks the target's own adapter."
)
FIGURE4_TITLE = (
    "Figure 4: mean fusion weight of each adapter (its softmax weight averaged over the dev "
    "set's tokens),\none panel per layer and one for the mean over layers; rows: fusion target "
    "(system), mean over seeds; red box: the target's own adapter"
)


@dataclass(frozen=True)
class Weights:
    """One run's fusion weights: `layers[l][n]` is adapter `adapters[n]`'s weight in layer l."""

    adapters: tuple[str, ...]
    layers: tuple[tuple[float, ...], ...]


@dataclass(frozen=True)
class WeightsRow:
    """A row of Figure 4: a target's fusion weights, averaged over `seeds` runs."""

    target: str
    system: str  # "fusion-st-a" or "fusion-mt-a"
    seeds: int
    weights: Weights

    @property
    def label(self) -> str:
        return f"{self.target} ({_SYSTEM_NAMES.get(self.system, self.system)})"


def read_weights(text: str) -> Weights:
    """Parse a `fusion_weights.json`; ValueError when it is not `{"adapters": [...],
    "weights": [[one per adapter] per layer]}`."""
    data = json.loads(text)
    adapters = tuple(str(a) for a in data["adapters"])
    layers = tuple(tuple(float(w) for w in layer) for layer in data["weights"])
    if not adapters or not layers or any(len(layer) != len(adapters) for layer in layers):
        raise ValueError(f"{len(adapters)} adapters but layer widths {[len(x) for x in layers]}")
    return Weights(adapters, layers)


def average_weights(runs: Sequence[Weights]) -> Weights:
    """The element-wise mean of several runs' weights, matched by adapter name (columns in
    first-seen order) and layer index; a value missing from some runs is the mean of the rest."""
    adapters = _union(w.adapters for w in runs)
    depth = max(len(w.layers) for w in runs)
    stack = np.stack([_aligned(w, adapters, depth) for w in runs])
    with _quiet_nan_mean():
        mean = np.nanmean(stack, axis=0)
    return Weights(adapters, tuple(tuple(float(v) for v in layer) for layer in mean))


def figure_data(rows: Sequence[WeightsRow]) -> dict[str, Any]:
    """Figure 4's numbers as JSON-ready data (NaN, i.e. an adapter a row did not fuse: null)."""
    columns = _union(r.weights.adapters for r in rows)
    return {
        "adapters": list(columns),
        "rows": [
            {
                "label": row.label,
                "target": row.target,
                "system": row.system,
                "seeds": row.seeds,
                "layers": _json_matrix(_aligned(row.weights, columns, _depth(rows))),
                "mean_over_layers": _json_matrix(_layer_mean(row, columns, _depth(rows)))[0],
            }
            for row in rows
        ],
    }


def plot_figure4(rows: Sequence[WeightsRow], path: Path) -> Path:
    """One heatmap panel per layer plus one of the mean over layers, annotated, as a PNG."""
    fig = figure4(rows)
    from matplotlib import pyplot as plt

    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path


def figure4(rows: Sequence[WeightsRow]) -> Any:
    """The matplotlib figure of `plot_figure4`: axes `adapter` and `fusion target (system)`,
    the colour bar labelled, what is averaged in the title, each target's own adapter boxed."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    columns = _union(r.weights.adapters for r in rows)
    depth = _depth(rows)
    per_row = np.stack([_aligned(r.weights, columns, depth) for r in rows])  # rows × L × A
    panels = [(f"layer {i + 1}", per_row[:, i, :]) for i in range(depth)]
    panels.append(("mean over layers", np.vstack([_layer_mean(r, columns, depth) for r in rows])))
    top = max(float(np.nanmax(per_row)) if np.isfinite(per_row).any() else 0.0, 1e-6)
    ncols = min(_PANELS_PER_ROW, len(panels))
    nrows = math.ceil(len(panels) / ncols)
    width = 1.6 + 0.75 * len(columns)
    height = 1.4 + 0.4 * len(rows)
    fig, axes = plt.subplots(
        nrows,
        ncols,
        figsize=(ncols * width + 1.5, nrows * height + 0.8),
        squeeze=False,
        layout="constrained",
    )
    image = None
    own = [(i, columns.index(r.target)) for i, r in enumerate(rows) if r.target in columns]
    for index, ax in enumerate(axes.flat):
        if index >= len(panels):
            ax.axis("off")
            continue
        title, matrix = panels[index]
        image = _heatmap(ax, matrix, columns, [r.label for r in rows], title, top, index % ncols)
        _box_cells(ax, own)
    fig.suptitle(FIGURE4_TITLE)
    if image is not None:
        fig.colorbar(image, ax=axes, shrink=0.8, label="mean fusion weight")
    return fig


def _box_cells(ax: Any, cells: Sequence[tuple[int, int]]) -> None:
    """Outline each (row, column) cell: a target's own adapter."""
    from matplotlib.patches import Rectangle

    for row, col in cells:
        corner = (col - 0.45, row - 0.45)  # inside the cell: clear of the axes' frame
        box = Rectangle(corner, 0.9, 0.9, fill=False, edgecolor="red", linewidth=2)
        ax.add_patch(box)


def _heatmap(
    ax: Any,
    matrix: np.ndarray,
    columns: Sequence[str],
    labels: Sequence[str],
    title: str,
    top: float,
    position: int,
) -> Any:
    image = ax.imshow(
        np.ma.masked_invalid(matrix), cmap="viridis", vmin=0.0, vmax=top, aspect="auto"
    )
    ax.set_xticks(range(len(columns)), labels=list(columns), rotation=45, ha="right", fontsize=8)
    ax.set_yticks(range(len(labels)), labels=list(labels) if position == 0 else [], fontsize=8)
    ax.set_xlabel("adapter", fontsize=8)
    if position == 0:
        ax.set_ylabel("fusion target (system)", fontsize=8)
    for (row, col), value in np.ndenumerate(matrix):
        if not np.isfinite(value):  # an adapter this fusion did not have
            ax.text(col, row, "—", ha="center", va="center", fontsize=7, color="grey")
            continue
        shade = "white" if value < 0.6 * top else "black"
        ax.text(col, row, f"{value:.2f}", ha="center", va="center", fontsize=7, color=shade)
    ax.set_title(title, fontsize=10)
    return image


def _union(groups: Iterable[Sequence[str]]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(name for group in groups for name in group))


def _depth(rows: Sequence[WeightsRow]) -> int:
    return max(len(r.weights.layers) for r in rows)


def _aligned(weights: Weights, columns: Sequence[str], depth: int) -> np.ndarray:
    """`weights` as a depth × len(columns) array, NaN where it has no value."""
    out = np.full((depth, len(columns)), np.nan)
    index = {name: i for i, name in enumerate(columns)}
    for layer, values in enumerate(weights.layers):
        for name, value in zip(weights.adapters, values, strict=True):
            out[layer, index[name]] = value
    return out


def _layer_mean(row: WeightsRow, columns: Sequence[str], depth: int) -> np.ndarray:
    with _quiet_nan_mean():
        return np.nanmean(_aligned(row.weights, columns, depth), axis=0)[None, :]


def _json_matrix(matrix: np.ndarray) -> list[list[float | None]]:
    return [[float(v) if np.isfinite(v) else None for v in row] for row in matrix]


@contextmanager
def _quiet_nan_mean() -> Iterator[None]:
    """nanmean of an all-NaN slice (an adapter no seed had) is NaN; no warning for that."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        yield
