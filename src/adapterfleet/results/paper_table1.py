"""The paper's reference numbers: Pfeiffer et al., 2021, "AdapterFusion: Non-Destructive Task
Composition for Transfer Learning" (EACL 2021, https://arxiv.org/abs/2005.00247), Table 1:
dev accuracy × 100 with BERT-base-uncased, mean and (where the paper gives one) standard
deviation over seeds, for its 16 tasks and 7 systems.

`TABLE1_CSV` is the whole table as published, copied verbatim from this workplace's
../shared/paper/table1.csv (its README: "Facts from the paper: the project may carry these
figures as data (with the citation)"); a test compares the two when the shared copy is present.
The paper's task names are its abbreviations (SST = SST-2, WGrande = Winogrande, HSwag =
HellaSwag, SocIQA = SocialIQA, CosQA = Cosmos QA, CSQA = CommonsenseQA); `paper_key` maps the
names users give their tasks to its rows. Its five multiple-choice tasks (WGrande, HSwag, SocIQA,
CosQA, CSQA) are accuracies like every other row. STS-B is no task of the table.
"""

from __future__ import annotations

import csv
import functools
import io
import re
from dataclasses import dataclass

PAPER_URL = "https://arxiv.org/abs/2005.00247"
PAPER_NAME = "Pfeiffer et al., 2021 (BERT-base)"

TABLE1_CSV = """\
task,head,head_std,full,full_std,st_a,st_a_std,mt_a,mt_a_std,fusion_st_a,fusion_st_a_std,fusion_mt_a,fusion_mt_a_std,st_a_houlsby,st_a_houlsby_std
MNLI,54.59,,84.10,,84.32,,82.49,0.49,84.28,,83.05,,84.13,
QQP,76.79,,90.87,,90.59,,89.47,0.60,90.71,,90.58,,90.63,
SST,85.17,0.45,92.39,0.22,91.85,0.41,92.27,0.71,92.20,0.18,93.00,0.20,92.75,0.37
WGrande,51.92,0.35,60.01,0.08,61.09,0.11,57.70,1.40,60.23,0.31,59.32,0.30,59.32,1.33
IMDB,85.05,0.22,94.05,0.21,93.85,0.07,92.56,0.54,93.82,0.39,92.66,0.32,93.96,0.22
HSwag,34.17,0.27,39.25,0.76,38.11,0.14,36.47,0.98,37.98,0.01,37.36,0.10,38.65,0.25
SocIQA,50.33,2.50,62.05,0.04,62.41,0.11,61.21,0.89,63.16,0.24,62.56,0.10,62.73,0.53
CosQA,50.06,0.51,60.28,0.40,60.01,0.02,61.25,0.90,60.65,0.55,62.78,0.07,61.37,0.35
SciTail,85.30,2.44,94.32,0.11,93.90,0.16,94.53,0.43,94.04,0.23,94.79,0.17,94.07,0.39
Argument,70.61,0.59,76.87,0.32,77.65,0.34,75.70,0.60,77.65,0.21,76.08,0.27,77.44,0.62
CSQA,41.09,0.27,58.88,0.40,58.91,0.57,53.30,2.19,59.73,0.54,56.73,0.14,60.05,0.36
BoolQ,63.07,1.27,74.84,0.24,75.66,1.25,78.76,0.76,76.25,0.19,79.18,0.45,76.02,1.13
MRPC,71.91,0.13,85.14,0.45,85.16,0.52,81.86,0.99,90.29,0.84,84.68,0.32,86.66,0.81
SICK,76.30,0.71,87.30,0.42,86.20,0.00,88.61,1.06,87.28,0.99,90.43,0.30,86.12,0.54
RTE,61.37,1.17,65.41,0.90,71.04,1.62,77.61,3.21,76.82,1.68,79.96,0.76,69.67,1.96
CB,68.93,4.82,82.49,2.33,86.07,3.87,89.09,1.15,92.14,0.97,89.81,0.99,87.50,4.72
Mean,64.17,,75.51,,76.05,,75.80,,77.33,,77.06,,76.32,
"""

# The CSV's column prefix -> the system key of the report's columns (report_data.COLUMNS).
SYSTEMS = {
    "head": "head",
    "full": "full",
    "st_a": "st-a",
    "st_a_houlsby": "st-a-houlsby",
    "mt_a": "mt-a",
    "fusion_st_a": "fusion-st-a",
    "fusion_mt_a": "fusion-mt-a",
}
MULTIPLE_CHOICE = ("winogrande", "hellaswag", "socialiqa", "cosmosqa", "csqa")
# A task name as `_normal` writes it -> the paper's row (`_row_key` of its name).
_ALIASES = {
    "sst": "sst2",
    "multinli": "mnli",
    "mnlim": "mnli",  # the matched dev set, the paper's MNLI column
    "mnlimatched": "mnli",
    "quora": "qqp",
    "wgrande": "winogrande",
    "wg": "winogrande",
    "hswag": "hellaswag",
    "siqa": "socialiqa",
    "sociqa": "socialiqa",
    "cosqa": "cosmosqa",
    "cosmos": "cosmosqa",
    "commonsenseqa": "csqa",
    "cqa": "csqa",
    "argumentmining": "argument",
    "ukpargument": "argument",
    "commitmentbank": "cb",
    "sicke": "sick",
}
_NOT_ALNUM = re.compile(r"[^a-z0-9]")


@dataclass(frozen=True)
class PaperCell:
    """One number of the paper's table: the mean and, where given, the std over seeds."""

    mean: float
    std: float | None


def _normal(name: str) -> str:
    return _NOT_ALNUM.sub("", name.lower())


def paper_key(task: str) -> str:
    """A config task name as the paper's row key: case, '-', '_', '.' and spaces ignored, the
    usual names of each data set accepted ("SST-2" and "sst"; "MNLI-m" and "mnli_matched";
    "commonsense_qa" and "CSQA"; "social_i_qa" and "siqa"; "Cosmos QA"; "winogrande" and
    "WGrande")."""
    key = _normal(task)
    return _ALIASES.get(key, key)


@functools.cache
def paper_table() -> dict[str, dict[str, PaperCell]]:
    """The paper's task rows (without its Mean row): row key -> system -> cell."""
    table: dict[str, dict[str, PaperCell]] = {}
    for record in csv.DictReader(io.StringIO(TABLE1_CSV)):
        if record["task"] == "Mean":
            continue
        table[paper_key(record["task"])] = {
            system: PaperCell(float(record[column]), _number(record[f"{column}_std"]))
            for column, system in SYSTEMS.items()
        }
    return table


def paper_cell(task: str, system: str) -> PaperCell | None:
    """The paper's cell of `system` on `task`, None when the paper has no such row."""
    return paper_table().get(paper_key(task), {}).get(system)


def paper_number(task: str, system: str) -> float | None:
    """The paper's mean dev accuracy (points) of `system` on `task`, None when not known."""
    cell = paper_cell(task, system)
    return None if cell is None else cell.mean


def has_paper_row(task: str) -> bool:
    return paper_key(task) in paper_table()


def _number(text: str) -> float | None:
    return float(text) if text.strip() else None
