"""The report of `adapterfleet prune`: one point per fusion (the source, then each pruned one)
with its dev metrics and inference speed, as `prune.md`, `prune.json` and `prune.png`.

Pure rendering of numbers the prune job measured (`orchestration.prune`); no torch, no Ray."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

SPEED_EXAMPLES = 512  # dev examples timed per model (the first ones, in the dev order)


@dataclass(frozen=True)
class PrunePoint:
    """One fusion of the report: the source (all adapters) or a pruned one."""

    kept: tuple[str, ...]  # adapter tasks, in the order the source fusion has them
    version: int
    alias: str
    dev_metrics: dict[str, float]
    examples_per_second: float
    trained: bool  # False: the source, or a pruned fusion registered before for these adapters


@dataclass(frozen=True)
class PruneReport:
    target: str
    source_version: int
    metric: str
    ranking: tuple[tuple[str, float], ...]  # (adapter task, mean fusion weight), best first
    points: tuple[PrunePoint, ...]  # the source first, then by decreasing size
    folder: Path

    def rows(self) -> list[dict[str, Any]]:
        base = self.points[0].examples_per_second
        return [
            {
                "adapters": len(p.kept),
                "kept": ", ".join(p.kept),
                "version": f"v{p.version} ({p.alias})",
                **{f"dev {k}": round(v, 4) for k, v in p.dev_metrics.items()},
                "examples/s": round(p.examples_per_second, 1),
                "speed-up": round(p.examples_per_second / base, 2) if base else float("nan"),
            }
            for p in self.points
        ]

    def markdown(self) -> str:
        rows = self.rows()
        header = list(rows[0])
        lines = [
            f"# Pruning the fusion of {self.target} (from v{self.source_version})",
            "",
            "Mean fusion weight on the dev set (over layers and tokens), best first: "
            + ", ".join(f"{task} {weight:.3f}" for task, weight in self.ranking)
            + ".",
            "",
            "| " + " | ".join(header) + " |",
            "|" + "---|" * len(header),
            *("| " + " | ".join(str(row[k]) for k in header) + " |" for row in rows),
            "",
            f"Speed: examples per second of inference over the first {SPEED_EXAMPLES} dev "
            "examples, every model timed in the same process, in turn, best of 3 rounds.",
        ]
        return "\n".join(lines) + "\n"


def write_report(report: PruneReport) -> Path:
    """prune.md, prune.json and prune.png under `report.folder / "report"`."""
    out = report.folder / "report"
    out.mkdir(parents=True, exist_ok=True)
    (out / "prune.md").write_text(report.markdown())
    payload = {
        "target": report.target,
        "source_version": report.source_version,
        "metric": report.metric,
        "ranking": [list(item) for item in report.ranking],
        "points": [asdict(p) for p in report.points],
    }
    (out / "prune.json").write_text(json.dumps(payload, indent=1) + "\n")
    plot_pruning(report, out / "prune.png")
    return out


def y_limits(values: list[float]) -> tuple[float, float]:
    """From zero (or the lowest value, when under it) to a little over the highest, which
    would otherwise lie on the frame."""
    low, high = min(0.0, *values), max(0.0, *values)
    return low, high + 0.08 * ((high - low) or 1.0)


def plot_pruning(report: PruneReport, path: Path) -> Path:
    """Dev metric and speed against the adapters kept, both axes from zero (or below, for a
    correlation under it): matplotlib's own limits drew 0.905 against 0.910 as a fall off a
    cliff."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    points = sorted(report.points, key=lambda p: len(p.kept))
    sizes = [len(p.kept) for p in points]
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.4))
    scores = [p.dev_metrics[report.metric] for p in points]
    speeds = [p.examples_per_second for p in points]
    left.plot(sizes, scores, marker="o")
    left.set_xlabel("adapters kept")
    left.set_ylabel(f"dev {report.metric}")
    right.plot(sizes, speeds, marker="o", color="tab:orange")
    right.set_xlabel("adapters kept")
    right.set_ylabel("inference examples/s")
    for axis, values in ((left, scores), (right, speeds)):
        axis.set_ylim(*y_limits(values))
        axis.set_xticks(sizes)
        axis.grid(alpha=0.3)
    fig.suptitle(f"{report.target}: pruning the fusion of v{report.source_version}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
