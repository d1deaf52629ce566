"""The report as Markdown: Table 1 (with the paper's numbers beside ours), the F1 table, the
chosen sweep points, the fusion lineages, what a budget trimmed, and notes."""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from adapterfleet.registry.tags import TAG_BUDGET, TAG_BUDGET_TRIMMED, TAG_OVERRIDES
from adapterfleet.results.paper_table1 import PAPER_NAME, PAPER_URL, PaperCell, paper_cell
from adapterfleet.results.report_data import (
    COLUMNS,
    TITLES,
    Cell,
    MetricFor,
    Summary,
    in_points,
    metric_of,
)

NOTHING = "—"
F1 = "f1"

Cells = Mapping[tuple[str, str], Cell]


def format_cell(summary: Summary | None, metric: str = "accuracy") -> str:
    """`mean ± std (n)`: points with two decimals, a metric reported as it is (a correlation,
    mse) with four; `mean (1)` for one seed; "—" for none."""
    if summary is None:
        return NOTHING
    digits = 2 if in_points(metric) else 4
    spread = "" if summary.std is None else f" ± {summary.std:.{digits}f}"
    return f"{summary.mean:.{digits}f}{spread} ({summary.n})"


def table1(tasks: Sequence[str], cells: Cells, metric: MetricFor, main: str | None = None) -> str:
    """Rows: tasks (each followed by the paper's row where it has numbers); columns: the
    paper's systems in its order. A task reported in another metric than `main` (a regression
    task's pearson) is named `task (metric)`."""
    rows = []
    for task in tasks:
        own = metric_of(metric, task)
        label = task if own == (main or own) else f"{task} ({own})"
        rows.append([label, *_cells(cells, task, own)])
        paper = [paper_cell(task, c.system) for c in COLUMNS]
        if own == "accuracy" and any(v is not None for v in paper):
            rows.append([f"{task} (paper)", *(_paper_cell(v) for v in paper)])
    return markdown_table(["task", *(c.title for c in COLUMNS)], rows)


def f1_table(tasks: Sequence[str], cells: Cells) -> str | None:
    """Dev F1 × 100 of the tasks whose runs logged `best_dev_f1`; None when none did."""
    with_f1 = [t for t in tasks if any(_summary(cells, t, c.system, F1) for c in COLUMNS)]
    if not with_f1:
        return None
    rows = [_row(task, cells, F1) for task in with_f1]
    return markdown_table(["task", *(c.title for c in COLUMNS)], rows)


def chosen_points(tasks: Sequence[str], cells: Cells, metric_for: MetricFor) -> list[str]:
    """One line per swept cell: the reduction factor and learning rate the table reports."""
    lines = []
    for task in tasks:
        metric = metric_of(metric_for, task)
        for system in ("st-a", "st-a-houlsby"):
            cell = cells.get((task, system))
            summary = cell.summary(metric) if cell else None
            if cell is None or summary is None:
                continue
            rf = NOTHING if cell.reduction_factor is None else str(cell.reduction_factor)
            lr = NOTHING if cell.learning_rate is None else f"{cell.learning_rate:g}"
            lines.append(
                f"- {task} ({TITLES[system]}): reduction factor {rf}, learning rate {lr} "
                f"(best mean dev {metric} over {summary.n} seed{'s' if summary.n > 1 else ''})"
            )
    return lines


def lineages(tasks: Sequence[str], cells: Cells) -> list[str]:
    return [
        f"- {task} (Fusion w/ ST-A): {cell.lineage or 'no lineage tag'}"
        for task in tasks
        if (cell := cells.get((task, "fusion-st-a"))) is not None
    ]


def budget_data(tags: Mapping[str, str], *, from_config: bool = False) -> dict[str, Any]:
    """The budget's name, what it changed and the `--set` overrides on top, from the
    experiment's tags (the last run's), or `from_config`: from those a run of the config the
    report was given sets."""
    trimmed = _json_tag(tags.get(TAG_BUDGET_TRIMMED), {})
    if not isinstance(trimmed, dict):
        trimmed = {"(unreadable tag)": tags.get(TAG_BUDGET_TRIMMED)}
    overrides = _json_tag(tags.get(TAG_OVERRIDES), [])
    if not isinstance(overrides, list):
        overrides = [f"(unreadable tag) {tags.get(TAG_OVERRIDES)}"]
    source = "config" if from_config else "last run"
    budget = {"name": tags.get(TAG_BUDGET), "trimmed": trimmed, "overrides": overrides}
    return {**budget, "from": source}


def _json_tag(raw: str | None, empty: Any) -> Any:
    try:
        return json.loads(raw) if raw else empty
    except json.JSONDecodeError:
        return None


def budget_section(budget: Mapping[str, Any]) -> list[str]:
    whose = "The config was read" if budget.get("from") == "config" else "The pipeline's last run"
    return _budget_lines(budget) + _override_lines(budget.get("overrides") or [], whose)


def _budget_lines(budget: Mapping[str, Any]) -> list[str]:
    name, trimmed = budget["name"], budget["trimmed"]
    if not name and not trimmed:
        return ["No budget was used: the runs follow the config as written."]
    head = f"Budget `{name or 'unnamed'}`"
    if not trimmed:
        return [f"{head} was used and changed no config key."]
    rows = [[f"`{key}`", f"`{json.dumps(value)}`"] for key, value in trimmed.items()]
    intro = f"{head} changed these config keys (the numbers above are not the paper's setting):"
    return [intro, "", markdown_table(["config key", "value set by the budget"], rows)]


def _override_lines(overrides: Sequence[str], whose: str) -> list[str]:
    if not overrides:
        return []
    listed = ", ".join(f"`{item}`" for item in overrides)
    changed = "also changed" if whose.endswith("run") else "with these changes"
    return ["", f"{whose} {changed}, with `--set` (these win): {listed}."]


def missing_notes(
    tasks: Sequence[str], cells: Cells, planned: Collection[str] | None = None
) -> list[str]:
    """Which columns and tasks have no finished runs at all. `planned`: the systems the
    pipeline runs (None: not known); the empty columns it does not run are one note."""
    empty = [c for c in COLUMNS if not any((t, c.system) in cells for t in tasks)]
    absent = [c.title for c in empty if planned is not None and c.system not in planned]
    notes = [f"{c.title}: no finished runs" for c in empty if c.title not in absent]
    if absent:
        notes.append(
            f"{', '.join(absent)}: not run by this pipeline (its config declares no such "
            "baseline; `baselines.systems` adds them)"
        )
    notes += [
        f"{t}: no finished runs" for t in tasks if not any((t, c.system) in cells for c in COLUMNS)
    ]
    return notes


def document(
    name: str,
    metric: str,
    table: str,
    sections: Mapping[str, Sequence[str]],
    others: Sequence[str] = (),
) -> str:
    """The whole report: title, how to read it, Table 1, then each non-empty section.
    `others`: the metrics of the rows named `task (metric)`."""
    lines = [f"# Table 1: {name}", "", how_to_read(metric, others), "", table]
    for title, body in sections.items():
        if body:
            lines += ["", f"## {title}", "", *body]
    return "\n".join(lines) + "\n"


def how_to_read(metric: str, others: Sequence[str] = ()) -> str:
    """The paragraph above Table 1: what a cell is, the rows in another metric, the paper's."""
    other = "; ".join(metric_in_words(m) for m in dict.fromkeys(others))
    own = f" A row `task (metric)` is in that metric: {other}." if other else ""
    return (
        f"Dev {metric_in_words(metric)} of the pipeline's finished MLflow runs: mean ± sample "
        f"standard deviation over seeds, (n) seeds; {NOTHING} where nothing ran.{own} "
        f'Rows "(paper)": {PAPER_NAME}, Table 1 ({PAPER_URL}): dev accuracy × 100, mean ± std '
        "over seeds where the paper gives one (multiple-choice tasks too)."
    )


def metric_in_words(metric: str) -> str:
    """`accuracy × 100`, `pearson as it is (a correlation in [-1, 1])`, ..."""
    if in_points(metric):
        return f"{metric} × 100"
    if metric == "mse":
        return "mse as it is (in the labels' units squared; lower is better)"
    return f"{metric} as it is (a correlation in [-1, 1])"


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A Markdown table with columns padded to their widest cell."""
    widths = [max([len(header[i]), *(len(r[i]) for r in rows)]) for i in range(len(header))]

    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)) + " |"

    rule = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    return "\n".join([line(header), rule, *(line(r) for r in rows)])


def _row(task: str, cells: Cells, metric: str) -> list[str]:
    return [task, *_cells(cells, task, metric)]


def _cells(cells: Cells, task: str, metric: str) -> list[str]:
    return [format_cell(_summary(cells, task, c.system, metric), metric) for c in COLUMNS]


def _summary(cells: Cells, task: str, system: str, metric: str) -> Summary | None:
    cell = cells.get((task, system))
    return cell.summary(metric) if cell is not None else None


def _paper_cell(cell: PaperCell | None) -> str:
    """`mean ± std` as the paper prints it (`mean` where it gives no std); "—" for none."""
    if cell is None:
        return NOTHING
    return f"{cell.mean:.2f}" + ("" if cell.std is None else f" ± {cell.std:.2f}")
