"""Figure 4: the PNG and the averaged fusion weights behind it.

In `table1_pipeline`, rte's Fusion w/ ST-A (lineage rte:v2) has two seeds with weights
[[0.6, 0.4], [0.2, 0.8]] and [[0.4, 0.6], [0.4, 0.6]] -> layer 1 [0.5, 0.5], layer 2 [0.3, 0.7],
mean over layers [0.4, 0.6]; the older lineage ([[1, 0], [1, 0]]) and the pruned fusion must not
enter. Fusion w/ MT-A has one seed, [[0.9, 0.1], [0.5, 0.5]].
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
from report_support import Pipeline

from adapterfleet.registry.artifacts import remove_artifacts
from adapterfleet.registry.store import get_client
from adapterfleet.results.report import ReportResult, build_report
from adapterfleet.results.report_figure import Weights, average_weights, read_weights

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def png_size(path: Path) -> tuple[int, int]:
    """(width, height) from the PNG's IHDR chunk, after checking the signature."""
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE, "not a PNG file"
    assert data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    assert data[-8:-4] == b"IEND", "PNG is truncated"
    return width, height


def test_figure_is_a_valid_png_of_plausible_size(table1_report: ReportResult) -> None:
    figure = table1_report.out_dir / "figure4.png"
    assert figure in table1_report.files
    width, height = png_size(figure)
    assert width >= 600 and height >= 200  # two layers + the mean: three panels side by side
    assert 10_000 < figure.stat().st_size < 2_000_000
    assert "![Figure 4](figure4.png)" in table1_report.markdown


def test_figure_numbers_are_the_seed_mean_per_target_and_system(
    table1_report: ReportResult,
) -> None:
    data = json.loads((table1_report.out_dir / "figure4.json").read_text())
    assert data["adapters"] == ["rte", "mrpc"]
    rows = {row["label"]: row for row in data["rows"]}
    assert list(rows) == ["rte (ST-A)", "rte (MT-A)"]
    st_a = rows["rte (ST-A)"]
    assert st_a["seeds"] == 2
    assert st_a["layers"] == [pytest.approx([0.5, 0.5]), pytest.approx([0.3, 0.7])]
    assert st_a["mean_over_layers"] == pytest.approx([0.4, 0.6])
    mt_a = rows["rte (MT-A)"]
    assert (mt_a["seeds"], mt_a["system"]) == (1, "fusion-mt-a")
    assert mt_a["layers"] == [pytest.approx([0.9, 0.1]), pytest.approx([0.5, 0.5])]
    report = json.loads((table1_report.out_dir / "report.json").read_text())
    assert report["figure4"] == data


def test_weights_are_matched_by_adapter_name_across_seeds() -> None:
    a = Weights(("rte", "mnli"), ((0.2, 0.8),))
    b = Weights(("mnli", "rte", "qqp"), ((0.4, 0.4, 0.2), (0.5, 0.5, 0.0)))
    mean = average_weights([a, b])
    assert mean.adapters == ("rte", "mnli", "qqp")
    assert mean.layers[0] == pytest.approx((0.3, 0.6, 0.2))
    assert mean.layers[1] == pytest.approx((0.5, 0.5, 0.0))  # only b has a second layer


def test_malformed_weights_files_are_refused() -> None:
    assert read_weights('{"adapters": ["a", "b"], "weights": [[0.5, 0.5]]}').layers == ((0.5, 0.5),)
    for text in (
        '{"adapters": ["a", "b"], "weights": [[1.0]]}',
        '{"adapters": [], "weights": []}',
        '{"weights": [[1.0]]}',
        "not json",
    ):
        with pytest.raises((ValueError, KeyError)):
            read_weights(text)


def test_without_weights_files_no_figure_is_drawn_and_a_stale_one_goes(
    new_pipeline, tmp_path: Path
) -> None:
    p: Pipeline = new_pipeline()
    p.fusion("rte", "rte:v1,mrpc:v1", 0, {"accuracy": 0.7})  # no fusion_weights.json
    out = tmp_path / "out"
    out.mkdir()
    (out / "figure4.png").write_bytes(PNG_SIGNATURE)  # left by an earlier report
    result = build_report(p.name, p.uri, out, log_to_mlflow=False)
    assert not (out / "figure4.png").exists() and not (out / "figure4.json").exists()
    assert [f.name for f in result.files] == ["table1.md", "report.json"]
    assert "Figure 4 not drawn" in result.markdown
    assert "seed 0 (run" in result.markdown and "no fusion_weights.json" in result.markdown
    assert json.loads((out / "report.json").read_text())["figure4"] is None
    assert result.run_id is None


def test_a_report_without_the_figure_takes_the_last_ones_out_of_the_report_run(
    new_pipeline, tmp_path: Path
) -> None:
    """One report run per experiment: the figure an earlier report logged there went on
    showing beside a table that said Figure 4 was not drawn."""
    p: Pipeline = new_pipeline()
    fusion = p.fusion("rte", "rte:v1,mrpc:v1", 0, {"accuracy": 0.7}, [[0.6, 0.4], [0.2, 0.8]])
    client = get_client(p.uri)
    first = build_report(p.name, p.uri, tmp_path / "first")
    assert {a.path for a in client.list_artifacts(first.run_id)} == {
        "table1.md", "figure4.png", "figure4.json", "report.json"
    }  # fmt: skip
    assert remove_artifacts(p.uri, fusion, ["fusion_weights.json"]) == ["fusion_weights.json"]
    second = build_report(p.name, p.uri, tmp_path / "second")
    assert "Figure 4 not drawn" in second.markdown
    assert second.run_id == first.run_id
    assert {a.path for a in client.list_artifacts(second.run_id)} == {"table1.md", "report.json"}


def test_figure4_labels_its_axes_colour_bar_and_boxes_each_targets_own_adapter(
    tmp_path: Path,
) -> None:
    from matplotlib.patches import Rectangle

    from adapterfleet.results.report_figure import WeightsRow, figure4

    weights = Weights(("rte", "mrpc"), ((0.6, 0.4), (0.2, 0.8)))
    fig = figure4([WeightsRow("rte", "fusion-st-a", 1, weights)])
    *panels, bar = fig.axes  # layer 1, layer 2, mean over layers, then the colour bar
    assert [ax.get_title() for ax in panels] == ["layer 1", "layer 2", "mean over layers"]
    assert {ax.get_xlabel() for ax in panels} == {"adapter"}
    assert panels[0].get_ylabel() == "fusion target (system)"
    assert bar.get_ylabel() == "mean fusion weight"
    assert "averaged over the dev set's tokens" in fig.get_suptitle()
    boxes = [p for p in panels[0].patches if isinstance(p, Rectangle) and not p.get_fill()]
    corners = [(b.get_x(), b.get_y()) for b in boxes]
    assert corners == [(pytest.approx(-0.45), pytest.approx(-0.45))]  # row rte, column rte
    fig.savefig(tmp_path / "figure4.png")
    assert png_size(tmp_path / "figure4.png")[0] > 0
