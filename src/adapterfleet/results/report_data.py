"""The cells of the paper's Table 1 from a pipeline's finished MLflow runs (plain data in,
plain data out: no MLflow here).

- ST-A / ST-A Houlsby: sweep trials (kind `trial`; param `architecture` says which), grouped by
  (reduction factor, learning rate); the group with the best mean of the main metric over its
  seeds is the cell (the newest run per seed); trials ASHA stopped early saved no adapter and
  do not count.
- Fusion w/ ST-A: fusion runs (kind `fusion`) not tagged `adapterfleet.pruned_from`; per target
  only the lineage of its newest run counts, and the newest run per seed.
- Every other column: baseline runs (kind `baseline`) tagged with the column's system; the
  newest run per (system, task, seed).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from adapterfleet.config.task_metrics import higher_is_better
from adapterfleet.registry import TAG_KIND, TAG_SEED, TAG_SYSTEM, TAG_TASK, RunData
from adapterfleet.registry.tags import TAG_LINEAGE, TAG_PRUNED_FROM, TAG_STOPPED_EARLY

# The key `orchestration.fusion_job` tags fusion runs with (importing it would load torch).
KINDS = ("trial", "fusion", "baseline")  # kind `mt-a` (MT-A's joint training run) is not a cell


@dataclass(frozen=True)
class Column:
    system: str  # the `adapterfleet.system` value
    title: str  # the paper's column name


COLUMNS = (
    Column("head", "Head"),
    Column("full", "Full"),
    Column("st-a", "ST-A"),
    Column("st-a-houlsby", "ST-A Houlsby"),
    Column("mt-a", "MT-A"),
    Column("fusion-st-a", "Fusion w/ ST-A"),
    Column("fusion-mt-a", "Fusion w/ MT-A"),
)
TITLES = {c.system: c.title for c in COLUMNS}
FUSION_SYSTEMS = ("fusion-st-a", "fusion-mt-a")
# The metric of the report: one name for every task, or task -> its metric (a regression task
# is reported in its own, e.g. pearson).
MetricFor = str | Callable[[str], str]
# Shares of the dev set, reported in points (× 100) as the paper reports its accuracies; every
# other metric (matthews, pearson, spearman: correlations in [-1, 1]; mse: in the labels' units
# squared) is reported as it is, where × 100 would read as a percentage it is not.
POINT_METRICS = frozenset({"accuracy", "f1", "f1_macro", "f1_micro"})


def scale_of(metric: str) -> float:
    """What the report multiplies `metric` by: 100 for a share (points), else 1."""
    return 100.0 if metric in POINT_METRICS else 1.0


def in_points(metric: str) -> bool:
    return metric in POINT_METRICS


def metric_of(metric: MetricFor, task: str) -> str:
    """The metric `task` is reported in."""
    return metric if isinstance(metric, str) else metric(task)


@dataclass(frozen=True)
class SeedRun:
    """The run that counts for one seed of a cell."""

    seed: int | None
    run: RunData

    def reported(self, metric: str) -> float | None:
        """`best_dev_<metric>` as the report gives it (× 100 for a share: `scale_of`), None
        when the run has no such metric."""
        value = self.run.metrics.get(f"best_dev_{metric}")
        return None if value is None or value != value else scale_of(metric) * value


@dataclass(frozen=True)
class Summary:
    mean: float
    std: float | None  # sample standard deviation over seeds; None for one seed
    n: int


@dataclass(frozen=True)
class Cell:
    """One (task, system) cell of Table 1 and the runs behind it."""

    task: str
    system: str
    seeds: tuple[SeedRun, ...]
    reduction_factor: int | None = None  # ST-A: the chosen grid point; Houlsby: its own
    learning_rate: float | None = None
    lineage: str | None = None  # fusion cells: the adapter versions fused

    def summary(self, metric: str) -> Summary | None:
        return summarize(v for s in self.seeds if (v := s.reported(metric)) is not None)


@dataclass(frozen=True)
class Collected:
    cells: dict[tuple[str, str], Cell]  # (task, system) -> cell
    notes: list[str] = field(default_factory=list)
    other_settings: int = 0  # runs left out, made with other settings than the report's config


def summarize(values: Iterable[float]) -> Summary | None:
    found = list(values)
    if not found:
        return None
    std = statistics.stdev(found) if len(found) > 1 else None
    return Summary(statistics.fmean(found), std, len(found))


def collect_cells(runs: Sequence[RunData], metric: MetricFor) -> Collected:
    """Every cell the runs (oldest first) make; notes say what was left out and why."""
    by_kind: dict[str, list[RunData]] = {}
    for run in runs:
        by_kind.setdefault(run.tags.get(TAG_KIND, ""), []).append(run)
    out = Collected({})
    for cell in baseline_cells(by_kind.get("baseline", []), out.notes):
        out.cells[(cell.task, cell.system)] = cell
    for cell in sweep_cells(by_kind.get("trial", []), metric):
        if (cell.task, cell.system) in out.cells:
            out.notes.append(
                f"{cell.task} / {TITLES[cell.system]}: from the sweep; the baseline runs of that "
                "system are left out"
            )
        out.cells[(cell.task, cell.system)] = cell
    for cell in fusion_cells(by_kind.get("fusion", []), out.notes):
        out.cells[(cell.task, cell.system)] = cell
    return out


def seed_of(run: RunData, *fallback_params: str) -> int | None:
    """The run's `seed` tag, else the first of `fallback_params` it has, as an int."""
    for text in (run.tags.get(TAG_SEED), *(run.params.get(k) for k in fallback_params)):
        if text is not None:
            return _int(text)
    return None


def newest_per_seed(runs: Iterable[RunData], *fallback_params: str) -> tuple[SeedRun, ...]:
    """One `SeedRun` per seed: the newest run (by start time) of each, in seed order."""
    newest: dict[int | None, RunData] = {}
    for run in sorted(runs, key=lambda r: r.start_time):
        newest[seed_of(run, *fallback_params)] = run
    order = sorted(newest, key=lambda s: (s is None, s or 0))
    return tuple(SeedRun(seed, newest[seed]) for seed in order)


def baseline_cells(runs: Sequence[RunData], notes: list[str]) -> list[Cell]:
    groups: dict[tuple[str, str], list[RunData]] = {}
    unknown: set[str] = set()
    for run in runs:
        system, task = run.tags.get(TAG_SYSTEM, ""), run.tags.get(TAG_TASK)
        if system not in TITLES:
            unknown.add(system or "(none)")
        elif task:
            groups.setdefault((task, system), []).append(run)
    notes += [f"baseline runs of unknown system {s!r} left out" for s in sorted(unknown)]
    return [_baseline_cell(task, system, group) for (task, system), group in groups.items()]


def _baseline_cell(task: str, system: str, runs: Sequence[RunData]) -> Cell:
    """A baseline's cell; the Houlsby adapter's also says its reduction factor and learning
    rate (the newest run's: every seed of a stage shares them)."""
    seeds = newest_per_seed(runs)
    if system != "st-a-houlsby":
        return Cell(task, system, seeds)
    newest = max(runs, key=lambda r: r.start_time)
    rf = _int(newest.value("reduction_factor"))
    lr = _float(newest.value("train.learning_rate"))
    return Cell(task, system, seeds, reduction_factor=rf, learning_rate=lr)


def sweep_cells(trials: Sequence[RunData], metric: MetricFor) -> list[Cell]:
    groups: dict[tuple[str, str], list[RunData]] = {}
    for run in trials:
        task = run.tags.get(TAG_TASK)
        if task and TAG_STOPPED_EARLY not in run.tags:  # stopped by ASHA: no adapter, no result
            system = "st-a-houlsby" if run.value("architecture") == "houlsby" else "st-a"
            groups.setdefault((task, system), []).append(run)
    cells = [
        _best_grid_point(task, system, group, metric_of(metric, task))
        for (task, system), group in groups.items()
    ]
    return [cell for cell in cells if cell is not None]


def _best_grid_point(task: str, system: str, trials: Sequence[RunData], metric: str) -> Cell | None:
    """The (reduction factor, learning rate) whose seeds have the best mean `metric` (the
    lowest for a lower-is-better one); ties go to more seeds, then the smaller reduction factor,
    then the smaller learning rate."""
    sign = 1.0 if higher_is_better(metric) else -1.0
    points: dict[tuple[int | None, float | None], list[RunData]] = {}
    for run in trials:
        rf, lr = _int(run.value("reduction_factor")), _float(run.value("learning_rate"))
        points.setdefault((rf, lr), []).append(run)
    ranked = []
    for (rf, lr), group in points.items():
        cell = Cell(task, system, newest_per_seed(group), reduction_factor=rf, learning_rate=lr)
        summary = cell.summary(metric)
        if summary is not None:
            ranked.append(((sign * summary.mean, summary.n, -(rf or 0), -(lr or 0.0)), cell))
    return max(ranked, key=lambda pair: pair[0])[1] if ranked else None


def fusion_cells(runs: Sequence[RunData], notes: list[str]) -> list[Cell]:
    targets: dict[str, list[RunData]] = {}
    for run in runs:
        task = run.tags.get(TAG_TASK)
        if task and TAG_PRUNED_FROM not in run.tags:
            targets.setdefault(task, []).append(run)
    cells = []
    for target, group in targets.items():
        lineage = max(group, key=lambda r: r.start_time).tags.get(TAG_LINEAGE)
        kept = [r for r in group if r.tags.get(TAG_LINEAGE) == lineage]
        if len(kept) < len(group):
            notes.append(
                f"{target} / Fusion w/ ST-A: {len(group) - len(kept)} run(s) of an older "
                f"lineage left out (kept {lineage})"
            )
        seeds = newest_per_seed(kept, "train.seed")
        cells.append(Cell(target, "fusion-st-a", seeds, lineage=lineage))
    return cells


def _float(text: str | None) -> float | None:
    try:
        return None if text is None else float(text)
    except ValueError:
        return None


def _int(text: str | None) -> int | None:
    value = _float(text)
    return int(value) if value is not None and math.isfinite(value) else None
