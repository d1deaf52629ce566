"""The paper's reference numbers: Pfeiffer et al., 2021, "AdapterFusion: Non-Destructive Task
Composition for Transfer Learning" (EACL 2021, https://arxiv.org/abs/2005.00247), Table 1:
mean dev accuracy (points) with BERT-base.

Only numbers found in a source are listed; every other cell of the paper's table is unknown
here and shows as "—". Source of the numbers below: the task-data notes of this workplace,
../shared/data/glue/README.md ("Reference dev accuracies with BERT-base (Pfeiffer et al., 2021,
Table 1)"). The stored copies of https://ar5iv.labs.arxiv.org/html/2005.00247,
https://www.arxiv-vanity.com/papers/2005.00247/ and
https://paperswithcode.com/paper/adapterfusion-non-destructive-task searched on 2026-11-23 gave
the abstract only, not Table 1, so Head, Full, ST-A Houlsby, MT-A and Fusion w/ MT-A have no
reference number yet.
"""

from __future__ import annotations

PAPER_URL = "https://arxiv.org/abs/2005.00247"
PAPER_NAME = "Pfeiffer et al., 2021 (BERT-base)"

# task -> system -> mean dev accuracy in points (../shared/data/glue/README.md, citing Table 1)
PAPER_TABLE1: dict[str, dict[str, float]] = {
    "rte": {"st-a": 71.04, "fusion-st-a": 76.82},
    "mrpc": {"st-a": 85.16, "fusion-st-a": 90.29},
    "sst2": {"st-a": 91.85, "fusion-st-a": 92.20},
    "mnli": {"st-a": 84.32, "fusion-st-a": 84.28},
    "qqp": {"st-a": 90.59, "fusion-st-a": 90.71},
}
_ALIASES = {"sst": "sst2", "multinli": "mnli"}


def paper_key(task: str) -> str:
    """A config task name as the paper's row key: case-insensitive, '-' and '_' ignored
    ("SST-2", "sst_2" and "sst2" are one task)."""
    key = task.lower().replace("-", "").replace("_", "")
    return _ALIASES.get(key, key)


def paper_number(task: str, system: str) -> float | None:
    """The paper's mean dev accuracy (points) of `system` on `task`, None when not known."""
    return PAPER_TABLE1.get(paper_key(task), {}).get(system)
