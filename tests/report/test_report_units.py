"""The report's rules on plain data (no MLflow): paper task names, cell text, the budget
section, seeds, the newest run per seed, ties between grid points, and tag keys shared with the
producers."""

from __future__ import annotations

from pathlib import Path

import pytest

from adapterfleet.registry import RunData
from adapterfleet.registry.tags import (
    TAG_BUDGET,
    TAG_BUDGET_TRIMMED,
    TAG_OVERRIDES,
    TAG_STOPPED_EARLY,
)
from adapterfleet.results.paper_table1 import (
    MULTIPLE_CHOICE,
    TABLE1_CSV,
    PaperCell,
    has_paper_row,
    paper_cell,
    paper_key,
    paper_number,
    paper_table,
)
from adapterfleet.results.report_data import (
    Summary,
    collect_cells,
    newest_per_seed,
    seed_of,
    summarize,
)
from adapterfleet.results.report_render import (
    budget_data,
    budget_section,
    format_cell,
    how_to_read,
    missing_notes,
    table1,
)


def run(run_id: str, start: int, tags: dict, params: dict | None = None, acc: float = 0.5):
    return RunData(run_id, start, tags, params or {}, {"best_dev_accuracy": acc})


def trial(run_id: str, start: int, rf: int, lr: float, seed: int, acc: float) -> RunData:
    tags = {"adapterfleet.kind": "trial", "adapterfleet.task": "rte", "seed": str(seed)}
    tags |= {"reduction_factor": str(rf), "learning_rate": str(lr)}
    return run(run_id, start, tags, {"architecture": "pfeiffer"}, acc)


@pytest.mark.parametrize("name", ["SST-2", "sst_2", "Sst2", "sst-2", "SST"])
def test_config_task_names_match_the_papers_rows(name: str) -> None:
    assert paper_key(name) == "sst2"
    assert paper_number(name, "st-a") == 91.85


def test_unknown_paper_numbers_are_none() -> None:
    assert paper_key("M_N-L_I") == "mnli"
    assert paper_number("MNLI", "fusion-st-a") == 84.28
    assert paper_cell("MNLI", "st-a") == PaperCell(84.32, None)  # the paper gives no std here
    assert paper_number("cola", "st-a") is None
    assert paper_number("sts-b", "st-a") is None and not has_paper_row("stsb")


def test_the_whole_table_every_task_and_all_seven_systems() -> None:
    table = paper_table()
    assert len(table) == 16 and "mean" not in table
    assert all(len(row) == 7 for row in table.values())
    assert paper_cell("rte", "head") == PaperCell(61.37, 1.17)
    assert paper_cell("CB", "st-a-houlsby") == PaperCell(87.50, 4.72)
    assert set(MULTIPLE_CHOICE) <= set(table)


@pytest.mark.parametrize(
    ("names", "st_a", "fusion"),
    [
        (["csqa", "CommonsenseQA", "commonsense_qa", "CSQA"], 58.91, 59.73),
        (["hellaswag", "HSwag", "hella-swag"], 38.11, 37.98),
        (["siqa", "socialiqa", "social_i_qa", "SocIQA"], 62.41, 63.16),
        (["cosmosqa", "cosmos_qa", "Cosmos QA", "CosQA"], 60.01, 60.65),
        (["winogrande", "WGrande", "wino-grande"], 61.09, 60.23),
        (["scitail", "SciTail"], 93.90, 94.04),
        (["sst", "SST-2", "sst2"], 91.85, 92.20),
        (["mnli", "MNLI-m", "mnli_matched", "MultiNLI"], 84.32, 84.28),  # as REPRODUCTION names it
    ],
)
def test_the_names_users_give_a_task_find_its_row(names, st_a, fusion) -> None:
    for name in names:
        assert paper_number(name, "st-a") == st_a, name
        assert paper_number(name, "fusion-st-a") == fusion, name


def test_the_carried_table_is_the_shared_copy_of_the_paper() -> None:
    shared = Path(__file__).resolve().parents[3] / "shared" / "paper" / "table1.csv"
    if not shared.is_file():
        pytest.skip(f"the shared copy of the paper's table is not at {shared}")
    assert shared.read_text() == TABLE1_CSV


def test_cell_text() -> None:
    assert format_cell(None) == "—"
    assert format_cell(Summary(71.234, None, 1)) == "71.23 (1)"
    assert format_cell(Summary(71.236, 0.5, 3)) == "71.24 ± 0.50 (3)"
    assert summarize([70.0, 72.0, 74.0]) == Summary(72.0, 2.0, 3)  # sample std
    assert summarize([]) is None


def test_a_share_is_in_points_a_correlation_or_mse_as_it_is() -> None:
    """accuracy 0.61 reads 61.00; Pearson 0.8419 stays 0.8419 (× 100 it would read as a
    percentage), and mse is no share at all."""
    assert format_cell(Summary(0.84191, 0.01234, 3), "pearson") == "0.8419 ± 0.0123 (3)"
    assert format_cell(Summary(0.6695, None, 1), "mse") == "0.6695 (1)"
    tags = {"adapterfleet.kind": "trial", "seed": "0", "reduction_factor": "16"}
    stsb = RunData("s", 1, {**tags, "adapterfleet.task": "stsb"}, {}, {"best_dev_pearson": 0.84})
    rte = RunData("r", 2, {**tags, "adapterfleet.task": "rte"}, {}, {"best_dev_accuracy": 0.61})
    metric = {"stsb": "pearson", "rte": "accuracy"}.__getitem__
    cells = collect_cells([stsb, rte], metric).cells
    assert cells[("stsb", "st-a")].summary("pearson") == Summary(0.84, None, 1)
    assert cells[("rte", "st-a")].summary("accuracy") == Summary(61.0, None, 1)
    lines = table1(["rte", "stsb"], cells, metric, "accuracy").splitlines()
    assert lines[2].startswith("| rte            | —") and "| 61.00 (1) " in lines[2]
    assert lines[4].startswith("| stsb (pearson) | —") and "| 0.8400 (1) " in lines[4]
    text = how_to_read("accuracy", ["pearson"])
    assert text.startswith("Dev accuracy × 100 of ")
    assert "A row `task (metric)` is in that metric: pearson as it is (a correlation" in text
    assert "lower is better" in how_to_read("accuracy", ["mse"])


def test_columns_the_pipeline_does_not_run_are_one_note_not_missing_runs() -> None:
    cells = collect_cells([trial("a", 1, 16, 1e-3, 0, 0.7)], "accuracy").cells
    assert missing_notes(["rte", "sst2"], cells, {"st-a", "fusion-st-a", "head"}) == [
        "Head: no finished runs",
        "Fusion w/ ST-A: no finished runs",
        "Full, ST-A Houlsby, MT-A, Fusion w/ MT-A: not run by this pipeline (its config "
        "declares no such baseline; `baselines.systems` adds them)",
        "sst2: no finished runs",
    ]
    assert missing_notes(["rte"], cells)[0] == "Head: no finished runs"  # plan unknown


def test_budget_section_says_none_empty_or_unreadable() -> None:
    assert budget_section(budget_data({})) == [
        "No budget was used: the runs follow the config as written."
    ]
    only_name = budget_section(budget_data({TAG_BUDGET: "cpu"}))
    assert only_name == ["Budget `cpu` was used and changed no config key."]
    broken = budget_data({TAG_BUDGET: "cpu", TAG_BUDGET_TRIMMED: "{"})
    assert broken["trimmed"] == {"(unreadable tag)": "{"}


def test_budget_section_lists_the_command_line_overrides_after_the_budget() -> None:
    tags = {
        TAG_BUDGET: "cpu",
        TAG_BUDGET_TRIMMED: '{"tasks.qqp.max_train_examples":2000}',
        TAG_OVERRIDES: '["tasks.qqp.max_train_examples=6000","storage=/x"]',
    }
    lines = budget_section(budget_data(tags))
    assert "`tasks.qqp.max_train_examples` | `2000`" in "\n".join(lines)
    assert lines[-1] == (
        "The pipeline's last run also changed, with `--set` (these win): "
        "`tasks.qqp.max_train_examples=6000`, `storage=/x`."
    )
    assert budget_section(budget_data({TAG_OVERRIDES: "[]"})) == [
        "No budget was used: the runs follow the config as written."
    ]


def test_seed_comes_from_the_tag_else_the_named_param() -> None:
    assert seed_of(run("a", 1, {"seed": "3"}, {"train.seed": "9"}), "train.seed") == 3
    assert seed_of(run("b", 1, {}, {"train.seed": "9"}), "train.seed") == 9
    assert seed_of(run("c", 1, {}, {"train.seed": "9"})) is None
    assert seed_of(run("d", 1, {"seed": "x"})) is None


def test_newest_run_per_seed_wins_whatever_the_order_given() -> None:
    runs = [
        run("new0", 30, {"seed": "0"}),
        run("s1", 20, {"seed": "1"}),
        run("old0", 10, {"seed": "0"}),
    ]
    assert [(s.seed, s.run.run_id) for s in newest_per_seed(runs)] == [(0, "new0"), (1, "s1")]


def test_ties_go_to_more_seeds_then_smaller_reduction_factor() -> None:
    runs = [
        trial("a", 1, 64, 1e-3, 0, 0.75),
        trial("b", 2, 16, 1e-3, 0, 0.75),
        trial("c", 3, 16, 1e-4, 0, 0.5),
        trial("d", 4, 16, 1e-4, 1, 1.0),  # also a mean of 75, over two seeds
    ]
    cell = collect_cells(runs, "accuracy").cells[("rte", "st-a")]
    assert (cell.reduction_factor, cell.learning_rate) == (16, 1e-4)
    cell = collect_cells(runs[:2], "accuracy").cells[("rte", "st-a")]
    assert cell.reduction_factor == 16


def test_trials_asha_stopped_early_are_not_results() -> None:
    stopped = trial("s", 5, 2, 1e-3, 0, 0.99)  # its latest dev accuracy, no adapter saved
    stopped.tags[TAG_STOPPED_EARLY] = "1"
    runs = [trial("a", 1, 16, 1e-3, 0, 0.75), stopped]
    cell = collect_cells(runs, "accuracy").cells[("rte", "st-a")]
    assert (cell.reduction_factor, [s.run.run_id for s in cell.seeds]) == (16, ["a"])
    assert collect_cells([stopped], "accuracy").cells == {}


def test_baselines_of_unknown_systems_are_noted_and_mt_a_runs_are_no_cells() -> None:
    runs = [
        run("x", 1, {"adapterfleet.kind": "baseline", "adapterfleet.system": "lora"}),
        run("y", 2, {"adapterfleet.kind": "mt-a", "adapterfleet.system": "mt-a"}),
    ]
    collected = collect_cells(runs, "accuracy")
    assert collected.cells == {}
    assert collected.notes == ["baseline runs of unknown system 'lora' left out"]


def test_a_report_shows_short_in_a_notebook(tmp_path: Path) -> None:
    """A report of 4 tasks and one seed printed ~4,000 characters, growing with every run."""
    from adapterfleet.registry.results import RunData
    from adapterfleet.results.report import ReportResult
    from adapterfleet.results.report_data import Cell, SeedRun

    runs = tuple(
        SeedRun(s, RunData(f"r{s}", s, {}, {}, {"best_dev_accuracy": 0.5})) for s in range(5)
    )
    cells = {(f"t{i}", "st-a"): Cell(f"t{i}", "st-a", runs) for i in range(16)}
    report = ReportResult("demo", tmp_path, "| table |", "# md", (), cells, ("a note",), "run1")
    assert len(repr(report)) < 300, repr(report)
    assert "'a note'" in repr(report) and report.cells == cells
