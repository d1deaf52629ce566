"""`adapterfleet report NAME`: the paper's Table 1 and Figure 4 from what is in MLflow.

Reads every finished trial, fusion and baseline run of the pipeline's experiment (with a
config's `ReportScope`, only those made with its settings: `report_scope`), makes the
Table 1 cells (`report_data`), averages the fusion runs' `fusion_weights.json` into Figure 4
(`report_figure`), and writes `table1.md`, `figure4.png`, `figure4.json` and `report.json` to a
folder; the same files are logged to the experiment's report run (reused by every report).
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from adapterfleet.registry import (
    ExperimentData,
    RegistryError,
    active_runs,
    download_run_file,
    find_experiment,
    finished_runs,
    open_report_run,
    safe_uri,
)
from adapterfleet.registry.artifacts import remove_artifacts
from adapterfleet.registry.tags import TAG_BUDGET, TAG_OVERRIDES
from adapterfleet.results.paper_table1 import PAPER_URL, has_paper_row, paper_cell
from adapterfleet.results.report_data import (
    COLUMNS,
    FUSION_SYSTEMS,
    KINDS,
    TITLES,
    Cell,
    Collected,
    Summary,
    collect_cells,
    in_points,
    scale_of,
)
from adapterfleet.results.report_figure import (
    FIGURE4_CAPTION,
    WEIGHTS_FILE,
    Weights,
    WeightsRow,
    average_weights,
    figure_data,
    plot_figure4,
    read_weights,
)
from adapterfleet.results.report_render import (
    F1,
    budget_data,
    budget_section,
    chosen_points,
    document,
    f1_table,
    lineages,
    metric_in_words,
    missing_notes,
    table1,
)
from adapterfleet.results.report_scope import ReportScope, in_scope
from adapterfleet.results.status_plan import TAG_PLAN, StatusPlan

TABLE_FILE = "table1.md"
F1_TITLE = "F1 (binary, of the second label: GLUE's F1; tasks whose runs logged it)"
FIGURE_FILE = "figure4.png"
FIGURE_DATA_FILE = "figure4.json"
DATA_FILE = "report.json"


@dataclass(frozen=True)
class ReportResult:
    """What `build_report` wrote: the folder, its files, the Markdown and the cells."""

    name: str
    out_dir: Path
    table: str = field(repr=False)  # Table 1 (with the paper's rows), as printed on the terminal
    markdown: str = field(repr=False)  # the whole table1.md
    files: tuple[Path, ...]
    cells: dict[tuple[str, str], Cell] = field(repr=False)  # (task, system) -> its runs
    notes: tuple[str, ...]
    run_id: str | None  # the MLflow report run the files were logged to
    unlearned: tuple[str, ...] = ()  # the notes on cells no better than chance (also in notes)
    left_out: int = 0  # runs made with other settings than the config's (notes say which)


def build_report(
    name: str,
    tracking_uri: str,
    out_dir: str | Path,
    *,
    log_to_mlflow: bool = True,
    scope: ReportScope | None = None,
) -> ReportResult:
    """Build the report of pipeline `name` from the store at `tracking_uri` into `out_dir`.
    `scope`: a config's settings (`orchestration.report_scope`); only its runs count. Without
    it, every run of the experiment does, under the plan its last `run` tagged."""
    experiment = find_experiment(tracking_uri, name)
    plan, collected = collect(tracking_uri, experiment, scope)
    tasks = task_order(plan, collected.cells)
    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as error:  # a file in the way, a folder that cannot be made
        raise RegistryError(
            f"--out: cannot write the report into {out} ({error.strerror or error}); give a "
            "folder that is not a file and can be created"
        ) from None
    rows = fusion_rows(tracking_uri, tasks, collected)
    figure = write_figure(rows, out)
    budget = budget_data(scope.tags if scope else experiment.tags, from_config=scope is not None)
    planned = planned_systems(plan) if scope or TAG_PLAN in experiment.tags else None
    notes = [*missing_notes(tasks, collected.cells, planned), *collected.notes]
    if figure is None:
        notes.append("Figure 4 not drawn: no fusion run has a readable fusion_weights.json")
    if plan.metric != "accuracy":
        notes.append(
            f"the paper's numbers are accuracies, the main metric is {plan.metric}: no rows"
        )
    notes += [
        f"{t}: dev {metric_in_words(plan.metric_for(t))}, the metric this task is selected on"
        for t in tasks
        if plan.metric_for(t) != plan.metric
    ] + [
        f"{t}: not a task of the paper's Table 1 (no paper row)"
        for t in tasks
        if not has_paper_row(t)
    ]
    unlearned = chance_notes(tasks, collected.cells, plan.metric_for, scope)
    notes += unlearned
    table = table1(tasks, collected.cells, plan.metric_for, plan.metric)
    markdown = render(name, plan, tasks, collected, table, budget, figure, notes)
    (out / TABLE_FILE).write_text(markdown)
    data = report_numbers(name, tracking_uri, plan, tasks, collected.cells, budget, rows)
    (out / DATA_FILE).write_text(json.dumps({**data, "notes": notes}, indent=1) + "\n")
    files = tuple(out / f for f in (TABLE_FILE, FIGURE_FILE, FIGURE_DATA_FILE, DATA_FILE))
    files = tuple(f for f in files if f.is_file())
    # an empty table would replace the report logged before (a `report -c` without the run's -o)
    logged = log_to_mlflow and bool(collected.cells)
    where = (tracking_uri, experiment.experiment_id)
    run_id = log_report(*where, files, report_scope_key(scope)) if logged else None
    return ReportResult(
        name, out, table, markdown, files, collected.cells, tuple(notes), run_id,
        tuple(unlearned), collected.other_settings,
    )  # fmt: skip


def collect(
    uri: str, experiment: ExperimentData, scope: ReportScope | None
) -> tuple[StatusPlan, Collected]:
    """The plan and the cells of the experiment's finished runs (those of `scope` only, with
    notes on the others, when given)."""
    runs = finished_runs(uri, experiment.experiment_id, KINDS)
    if not runs:
        raise RegistryError(
            f"experiment {experiment.name!r} in {safe_uri(uri)} has no finished trial, fusion "
            f"or baseline runs yet; nothing to report (see `adapterfleet status "
            f"{experiment.name}`)"
        )
    if scope is None:
        plan = StatusPlan.from_tags(experiment.name, experiment.tags, [])
        return plan, collect_cells(runs, plan.metric_for)
    sweeps = active_runs(uri, experiment.experiment_id, "sweep")
    runs, left_out, other = in_scope(runs, scope, sweeps)
    collected = collect_cells(runs, scope.plan.metric_for)
    collected.notes[:0] = left_out
    return scope.plan, replace(collected, other_settings=other)


def planned_systems(plan: StatusPlan) -> set[str]:
    """The columns of Table 1 the pipeline runs: ST-A for its swept tasks, Fusion w/ ST-A for
    its targets, and its baselines."""
    return {
        *(["st-a"] if plan.tasks else []),
        *(["fusion-st-a"] if plan.targets else []),
        *plan.baselines,
    }


def task_order(plan: StatusPlan, cells: Mapping[tuple[str, str], Cell]) -> list[str]:
    """The pipeline's tasks and fusion targets in config order, then any other task with
    results, sorted."""
    planned = list(dict.fromkeys([*plan.tasks, *plan.targets]))
    return planned + sorted({task for task, _ in cells} - set(planned))


def fusion_rows(uri: str, tasks: Sequence[str], collected: Collected) -> list[WeightsRow]:
    """Figure 4's rows: per target and fusion system, the mean of its seeds' weights files."""
    rows = []
    with tempfile.TemporaryDirectory(prefix="adapterfleet-report-") as tmp:
        for task in tasks:
            for system in FUSION_SYSTEMS:
                cell = collected.cells.get((task, system))
                found = _seed_weights(uri, cell, Path(tmp), collected.notes) if cell else []
                if found:
                    rows.append(WeightsRow(task, system, len(found), average_weights(found)))
    return rows


def _seed_weights(uri: str, cell: Cell, tmp: Path, notes: list[str]) -> list[Weights]:
    found: list[Weights] = []
    for seed in cell.seeds:
        where = f"{cell.task} / {TITLES[cell.system]} seed {seed.seed} (run {seed.run.run_id})"
        path = download_run_file(uri, seed.run.run_id, WEIGHTS_FILE, tmp / seed.run.run_id)
        if path is None:
            notes.append(f"{where}: no {WEIGHTS_FILE}")
            continue
        try:
            found.append(read_weights(path.read_text()))
        except (ValueError, KeyError, TypeError) as exc:
            notes.append(f"{where}: {WEIGHTS_FILE} unreadable ({exc})")
    return found


def write_figure(rows: Sequence[WeightsRow], out: Path) -> Path | None:
    """figure4.png and figure4.json, or neither (an older copy removed) without rows."""
    if not rows:
        for stale in (FIGURE_FILE, FIGURE_DATA_FILE):
            (out / stale).unlink(missing_ok=True)
        return None
    (out / FIGURE_DATA_FILE).write_text(json.dumps(figure_data(rows), indent=1) + "\n")
    return plot_figure4(rows, out / FIGURE_FILE)


def chance_notes(
    tasks: Sequence[str],
    cells: Mapping[tuple[str, str], Cell],
    metric_for: Callable[[str], str],
    scope: ReportScope | None,
) -> list[str]:
    """A note for each cell whose mean is no better than what a model that learned nothing
    scores on the task's dev split (the config's data: with `-c` only): such a cell is a run
    that did not learn, not a result (the pipeline's own line said so; the report did not)."""
    if scope is None:
        return []
    notes = []
    order = {task: index for index, task in enumerate(tasks)}  # by task, systems as the table's
    for (task, system), cell in sorted(cells.items(), key=lambda item: order.get(item[0][0], 0)):
        note = scope.chance.get(task)
        metric = metric_for(task)
        summary = cell.summary(metric)
        if task not in tasks or note is None or summary is None:
            continue
        said = note(metric, summary.mean / scale_of(metric))
        if said:
            shown = f"{summary.mean:.2f}" if in_points(metric) else f"{summary.mean:.4f}"
            notes.append(f"{task}, {system}: {metric} {shown}{said}: it did not learn the task")
    return notes


def render(
    name: str,
    plan: StatusPlan,
    tasks: Sequence[str],
    collected: Collected,
    table: str,
    budget: Mapping[str, Any],
    figure: Path | None,
    notes: Sequence[str],
) -> str:
    cells, metric = collected.cells, plan.metric
    f1 = f1_table(tasks, cells) if metric != F1 else None
    sections = {
        F1_TITLE: [f1] if f1 else [],
        "ST-A: the grid point each cell reports": chosen_points(tasks, cells, plan.metric_for),
        "Fusion w/ ST-A: the adapter versions fused": lineages(tasks, cells),
        "Figure 4": [f"![Figure 4]({FIGURE_FILE})", "", FIGURE4_CAPTION] if figure else [],
        "What the budget trimmed": budget_section(budget),
        "Notes": [f"- {note}" for note in notes],
    }
    others = [plan.metric_for(t) for t in tasks if plan.metric_for(t) != metric]
    return document(name, metric, table, sections, others)


def report_numbers(
    name: str,
    uri: str,
    plan: StatusPlan,
    tasks: Sequence[str],
    cells: Mapping[tuple[str, str], Cell],
    budget: Mapping[str, Any],
    rows: Sequence[WeightsRow],
) -> dict[str, Any]:
    """Every number of the report, per seed, as JSON-ready data: a cell's summary is in points
    (100 × metric) for a share (accuracy, F1), its metric as it is otherwise (`scale`); the
    per-seed metrics are as logged."""
    ordered = [cells[(t, c.system)] for t in tasks for c in COLUMNS if (t, c.system) in cells]
    return {
        "name": name,
        "tracking_uri": safe_uri(uri),
        "generated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "metric": plan.metric,
        "task_metrics": {t: plan.metric_for(t) for t in tasks if plan.metric_for(t) != plan.metric},
        "scale": {
            m: scale_of(m) for m in dict.fromkeys([plan.metric, F1, *map(plan.metric_for, tasks)])
        },
        "columns": [{"system": c.system, "title": c.title} for c in COLUMNS],
        "tasks": list(tasks),
        "cells": [_cell_data(cell, plan.metric_for(cell.task)) for cell in ordered],
        "paper": {
            "source": PAPER_URL,
            "accuracy": {t: _paper_data(t, "mean") for t in tasks if has_paper_row(t)},
            "accuracy_std": {t: _paper_data(t, "std") for t in tasks if has_paper_row(t)},
        },
        "budget": dict(budget),
        "figure4": figure_data(rows) if rows else None,
    }


def _paper_data(task: str, field: str) -> dict[str, float | None]:
    """The paper's row of `task`, one field of each cell (mean or std) per system."""
    return {c.system: getattr(paper_cell(task, c.system), field) for c in COLUMNS}


def _cell_data(cell: Cell, metric: str) -> dict[str, Any]:
    return {
        "task": cell.task,
        "system": cell.system,
        "column": TITLES[cell.system],
        metric: _summary_data(cell.summary(metric)),
        F1: _summary_data(cell.summary(F1)),
        "reduction_factor": cell.reduction_factor,
        "learning_rate": cell.learning_rate,
        "lineage": cell.lineage,
        "seeds": [
            {
                "seed": s.seed,
                "run_id": s.run.run_id,
                "metrics": {k: v for k, v in s.run.metrics.items() if k.startswith("best_dev_")},
            }
            for s in cell.seeds
        ],
    }


def _summary_data(summary: Summary | None) -> dict[str, Any] | None:
    if summary is None:
        return None
    return {"mean": summary.mean, "std": summary.std, "n": summary.n}


_WHERE = ("storage=", "tracking_uri=", "name=")  # where the runs are, not which count


def report_scope_key(scope: ReportScope | None) -> str:
    """Which report run a report logs to: "all" without a config; with one, the budget and
    `--set` it was read with (`budget tiny, adapters.training.max_epochs=2`; sorted, and those
    naming where the runs are left out), "config" for none: a report of other settings
    replaced this one's."""
    if scope is None:
        return "all"
    budget = scope.tags.get(TAG_BUDGET)
    try:
        overrides = json.loads(scope.tags.get(TAG_OVERRIDES) or "[]")
    except ValueError:  # cut at the tag's length: its text as it is
        overrides = [scope.tags[TAG_OVERRIDES]]
    counted = sorted(str(o) for o in overrides if not str(o).startswith(_WHERE))  # any order
    parts = [f"budget {budget}"] * bool(budget) + counted
    return ", ".join(parts)[:250] or "config"


def log_report(uri: str, experiment_id: str, files: Sequence[Path], scope: str = "all") -> str:
    """Log `files` at the artifact root of the experiment's report run of `scope`
    (`report_scope_key`), and take out the report's files an earlier report logged there that
    this one has not (Figure 4 not drawn this time); the run's id."""
    gone = {TABLE_FILE, FIGURE_FILE, FIGURE_DATA_FILE, DATA_FILE} - {f.name for f in files}
    with tempfile.TemporaryDirectory(prefix="adapterfleet-report-") as tmp:
        for path in files:
            shutil.copy2(path, Path(tmp) / path.name)
        with open_report_run(uri, experiment_id, scope) as run:
            run.log_artifacts(tmp)
            remove_artifacts(uri, run.run_id, gone)
            return run.run_id
