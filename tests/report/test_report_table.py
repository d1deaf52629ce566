"""Table 1 from a real SQLite MLflow store: the cells, the chosen sweep point, what is left out,
the paper's rows, the budget section, report.json and the MLflow report run.

The pipeline (`report_support.table1_pipeline_in`) and the cells worked out by hand, in points:
- rte ST-A: rf 16 / lr 1e-3 seeds 70, 72, 74 -> 72.00 ± 2.00 (3) beats rf 64 / lr 1e-4
  (75, 65 -> 70.00); a FAILED (99) and a RUNNING (98) trial would win and must not count.
- rte ST-A Houlsby: one houlsby trial, 69 -> 69.00 (1).
- mrpc ST-A: seeds 0, 1, then a newer run of seed 0: accuracy 82, 84 -> 83.00 ± 1.41 (2);
  F1 87, 88 -> 87.50 ± 0.71 (2) (the older seed-0 run, 80 / 86, must not count).
- rte Fusion w/ ST-A: lineage rte:v2 seeds 76 (seed tag), 78 (only the param train.seed) ->
  77.00 ± 1.41 (2); an older lineage (60), a newer pruned fusion (99) and a newer FAILED one
  (50) must not count.
- rte Head 55, 57 -> 56.00 ± 1.41 (2) (an older job of seed 1, 51, must not count);
  MT-A 66 -> 66.00 (1) (the joint kind mt-a run, 99, is no cell); Fusion w/ MT-A 79 ->
  79.00 (1); Full: nothing ran. sst2: nothing ran.
- mrpc ST-A Houlsby: one baseline run (rf 16, lr 1e-3 as params) 81 -> 81.00 (1).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mlflow import MlflowClient
from report_support import BUDGET_TRIMMED, Pipeline, table_rows

from adapterfleet.results.report import ReportResult, build_report

COLUMNS = ["Head", "Full", "ST-A", "ST-A Houlsby", "MT-A", "Fusion w/ ST-A", "Fusion w/ MT-A"]


def test_table1_cells_are_mean_std_and_seeds_in_points(table1_report: ReportResult) -> None:
    rows = table_rows(table1_report.table)
    assert list(rows["rte"]) == COLUMNS
    assert rows["rte"] == {
        "Head": "56.00 ± 1.41 (2)",
        "Full": "—",
        "ST-A": "72.00 ± 2.00 (3)",
        "ST-A Houlsby": "69.00 (1)",
        "MT-A": "66.00 (1)",
        "Fusion w/ ST-A": "77.00 ± 1.41 (2)",
        "Fusion w/ MT-A": "79.00 (1)",
    }
    assert rows["mrpc"]["ST-A"] == "83.00 ± 1.41 (2)"
    assert rows["mrpc"]["ST-A Houlsby"] == "81.00 (1)"
    assert set(rows["mrpc"].values()) == {"83.00 ± 1.41 (2)", "81.00 (1)", "—"}
    assert set(rows["sst2"].values()) == {"—"}
    assert [label for label in rows if "paper" not in label] == ["rte", "mrpc", "sst2"]


def test_the_papers_row_sits_beside_ours_all_seven_columns(table1_report: ReportResult) -> None:
    rows = table_rows(table1_report.table)
    assert rows["rte (paper)"] == {
        "Head": "61.37 ± 1.17",
        "Full": "65.41 ± 0.90",
        "ST-A": "71.04 ± 1.62",
        "ST-A Houlsby": "69.67 ± 1.96",
        "MT-A": "77.61 ± 3.21",
        "Fusion w/ ST-A": "76.82 ± 1.68",
        "Fusion w/ MT-A": "79.96 ± 0.76",
    }
    assert rows["mrpc (paper)"]["Fusion w/ ST-A"] == "90.29 ± 0.84"
    assert rows["sst2 (paper)"]["ST-A"] == "91.85 ± 0.41"


def test_f1_table_lists_only_tasks_whose_runs_logged_f1(table1_report: ReportResult) -> None:
    from adapterfleet.results.report import F1_TITLE

    assert "binary, of the second label" in F1_TITLE  # which F1: GLUE's, as the README says
    rows = table_rows(table1_report.markdown, after=f"## {F1_TITLE}")
    assert list(rows) == ["mrpc"]
    assert rows["mrpc"]["ST-A"] == "87.50 ± 0.71 (2)"


def test_chosen_point_lineage_budget_and_missing_are_stated(table1_report: ReportResult) -> None:
    text = table1_report.markdown
    assert (
        "- rte (ST-A): reduction factor 16, learning rate 0.001 "
        "(best mean dev accuracy over 3 seeds)" in text
    )
    assert "- rte (ST-A Houlsby): reduction factor 16, learning rate 0.0001" in text
    assert "- mrpc (ST-A): reduction factor 16, learning rate 0.001" in text
    assert (
        "- mrpc (ST-A Houlsby): reduction factor 16, learning rate 0.001 "
        "(best mean dev accuracy over 1 seed)" in text
    )
    assert "- rte (Fusion w/ ST-A): rte:v2,mrpc:v1" in text
    assert "Budget `cpu` changed these config keys" in text
    trimmed = table_rows(text, after="## What the budget trimmed")
    assert trimmed == {
        "`adapters.reduction_factors`": {"value set by the budget": "`[16]`"},
        "`tasks.mnli.max_train_examples`": {"value set by the budget": "`2000`"},
    }
    assert "- Full: no finished runs" in text
    assert "- sst2: no finished runs" in text
    assert "1 run(s) of an older lineage left out (kept rte:v2,mrpc:v1)" in text


def test_report_json_holds_every_number_per_seed(table1_report: ReportResult) -> None:
    data = json.loads((table1_report.out_dir / "report.json").read_text())
    assert data["metric"] == "accuracy"
    assert data["tasks"] == ["rte", "mrpc", "sst2"]
    cells = {(c["task"], c["system"]): c for c in data["cells"]}
    assert set(cells) == {
        ("rte", "head"),
        ("rte", "st-a"),
        ("rte", "st-a-houlsby"),
        ("rte", "mt-a"),
        ("rte", "fusion-st-a"),
        ("rte", "fusion-mt-a"),
        ("mrpc", "st-a"),
        ("mrpc", "st-a-houlsby"),
    }
    st_a = cells[("rte", "st-a")]
    assert st_a["accuracy"]["mean"] == pytest.approx(72.0)
    assert st_a["accuracy"]["std"] == pytest.approx(2.0)
    assert st_a["accuracy"]["n"] == 3
    assert (st_a["reduction_factor"], st_a["learning_rate"]) == (16, 0.001)
    assert [s["seed"] for s in st_a["seeds"]] == [0, 1, 2]
    assert [s["metrics"]["best_dev_accuracy"] for s in st_a["seeds"]] == [0.70, 0.72, 0.74]
    mrpc = cells[("mrpc", "st-a")]
    assert [s["metrics"]["best_dev_f1"] for s in mrpc["seeds"]] == [0.87, 0.88]
    assert mrpc["f1"]["mean"] == pytest.approx(87.5)
    fusion = cells[("rte", "fusion-st-a")]
    assert [s["seed"] for s in fusion["seeds"]] == [0, 1]
    assert fusion["lineage"] == "rte:v2,mrpc:v1"
    assert cells[("rte", "mt-a")]["accuracy"]["std"] is None
    paper_rte = data["paper"]["accuracy"]["rte"]
    assert paper_rte == {
        "head": 61.37,
        "full": 65.41,
        "st-a": 71.04,
        "st-a-houlsby": 69.67,
        "mt-a": 77.61,
        "fusion-st-a": 76.82,
        "fusion-mt-a": 79.96,
    }
    assert data["paper"]["accuracy_std"]["rte"]["mt-a"] == 3.21
    assert data["budget"] == {
        "name": "cpu",
        "trimmed": BUDGET_TRIMMED,
        "overrides": [],
        "from": "last run",  # no config given: the experiment's tags
    }


def test_files_are_logged_to_one_report_run_reused_on_a_rerun(
    table1_report: ReportResult, table1_pipeline: Pipeline, tmp_path: Path
) -> None:
    client = MlflowClient(table1_pipeline.uri)
    names = {a.path for a in client.list_artifacts(table1_report.run_id)}
    assert names == {"table1.md", "figure4.png", "figure4.json", "report.json"}
    local = client.download_artifacts(table1_report.run_id, "table1.md", str(tmp_path))
    assert Path(local).read_text() == (table1_report.out_dir / "table1.md").read_text()

    again = build_report(table1_pipeline.name, table1_pipeline.uri, tmp_path / "again")
    assert again.run_id == table1_report.run_id
    assert again.table == table1_report.table
    runs = client.search_runs(
        [table1_pipeline.experiment_id], filter_string="tags.`adapterfleet.kind` = 'report'"
    )
    assert [r.info.run_id for r in runs] == [table1_report.run_id]
    assert runs[0].info.status == "FINISHED"


def test_multiple_choice_tasks_get_the_papers_row_under_the_names_users_give(
    new_pipeline, tmp_path: Path
) -> None:
    from report_support import uid

    from adapterfleet.results.status import StatusPlan

    name = uid("mc")
    plan = StatusPlan(name, name, "accuracy", 1, ("commonsense_qa", "hellaswag", "stsb"), {})
    p = new_pipeline(plan.to_tags())
    p.trial("commonsense_qa", 16, 1e-3, 0, {"accuracy": 0.31})
    p.trial("hellaswag", 16, 1e-3, 0, {"accuracy": 0.27})
    report = build_report(p.name, p.uri, tmp_path / "out", log_to_mlflow=False)
    rows = table_rows(report.table)
    assert rows["commonsense_qa"]["ST-A"] == "31.00 (1)"
    assert rows["commonsense_qa (paper)"]["ST-A"] == "58.91 ± 0.57"
    assert rows["commonsense_qa (paper)"]["Fusion w/ ST-A"] == "59.73 ± 0.54"
    assert rows["hellaswag (paper)"]["Head"] == "34.17 ± 0.27"
    assert "stsb (paper)" not in rows
    assert "stsb: not a task of the paper's Table 1 (no paper row)" in report.notes
