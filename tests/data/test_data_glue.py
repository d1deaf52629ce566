"""configs/glue.yaml loads the five shared GLUE classification tasks with the README's row counts
(STS-B, the regression task, is tested in test_data_regression.py)."""

from __future__ import annotations

import pytest
from datatest_support import GLUE_CONFIG, GLUE_DIR, needs_glue

from adapterfleet.data import load_tasks_config

pytestmark = needs_glue

# (train, dev) from ../shared/data/glue/README.md; QQP: 23497 rows, 1 malformed, 10% held out.
COUNTS = {
    "rte": (2490, 277),
    "mrpc": (3668, 408),
    "sst2": (67349, 872),
    "mnli": (8999, 9815),
    "qqp": (21146, 2350),
}


def test_config_declares_the_five_tasks() -> None:
    specs = load_tasks_config(GLUE_CONFIG)
    assert sorted(specs) == sorted([*COUNTS, "stsb"])
    assert specs["qqp"].dev is None and specs["qqp"].dev_fraction == 0.1
    assert specs["mrpc"].metrics == ("accuracy", "f1") == specs["qqp"].metrics
    assert specs["rte"].train.path == GLUE_DIR.resolve() / "RTE" / "train.tsv"


@pytest.mark.parametrize("name", sorted(COUNTS))
def test_row_counts_and_labels(glue_tasks: dict, name: str) -> None:
    task = glue_tasks[name]
    assert (len(task.train), len(task.dev)) == COUNTS[name]
    for split in (task.train, task.dev):
        # every class present, none outside [0, num_labels)
        assert sorted(split.unique("label")) == list(range(task.num_labels))
        assert all(isinstance(t, str) and t for t in split[:100]["text_a"])
    pair = name != "sst2"
    assert ("text_b" in task.train.column_names) == pair


def test_qqp_malformed_row_is_counted(glue_tasks: dict) -> None:
    qqp = glue_tasks["qqp"]
    assert qqp.skipped == 1 and qqp.skipped_by_split == {"train": 1}
    assert sum(t.skipped for n, t in glue_tasks.items() if n != "qqp") == 0
    malformed = "How is the life of a math student? Could you describe your own experiences?"
    texts = qqp.train.to_dict()["text_a"] + qqp.dev.to_dict()["text_a"]
    assert malformed not in texts
    assert qqp.train[0]["text_a"] == "What causes stool color to change to yellow?"


def test_file_contents_reach_the_columns(glue_tasks: dict) -> None:
    mrpc = glue_tasks["mrpc"]  # BOM file: label column "Quality" found, first row kept
    assert mrpc.train[0]["text_a"].startswith("Amrozi accused his brother")
    assert mrpc.train[0]["label"] == 1
    rte = glue_tasks["rte"]
    assert rte.train[0]["text_b"] == "Weapons of Mass Destruction Found in Iraq."
    assert rte.label_names[rte.train[0]["label"]] == "not_entailment"
    mnli = glue_tasks["mnli"]  # train from text_a/text_b records, dev from premise/hypothesis
    sad = "We are especially sad this year because we lost a lot of people."
    assert mnli.train[0]["text_b"] == sad
    assert mnli.dev[0]["text_a"] == "The new rights are nice enough"
    assert mnli.label_names[mnli.dev[0]["label"]] == "neutral"
    assert glue_tasks["sst2"].train[0]["text_a"].startswith("hide new secretions")
