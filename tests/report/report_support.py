"""Runs logged the way their producers log them, with the real `open_trial_run` /
`open_fusion_run` / `open_baseline_run`, and the Table 1 pipeline most report tests read (its
expected cells are worked out by hand in `test_report_table.py`)."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from adapterfleet.registry import (
    TAG_TASK,
    MlflowRunLogger,
    ensure_experiment,
    open_baseline_run,
    open_fusion_run,
    open_trial_run,
)
from adapterfleet.registry.tags import TAG_LINEAGE, TAG_PRUNED_FROM
from adapterfleet.results.status import StatusPlan

BUDGET_TRIMMED = {"adapters.reduction_factors": [16], "tasks.mnli.max_train_examples": 2000}


def uid(stem: str) -> str:
    return f"{stem}-{uuid.uuid4().hex[:8]}"


@dataclass
class Pipeline:
    """One pipeline's experiment in the store, and helpers that log runs the way the
    producers do."""

    uri: str
    name: str
    experiment_id: str
    folder: Path

    def trial(
        self,
        task: str,
        rf: int,
        lr: float,
        seed: int,
        metrics: Mapping[str, float],
        *,
        architecture: str = "pfeiffer",
        status: str | None = "FINISHED",
        parent: str | None = None,
    ) -> str:
        """A trial run; `parent`: its sweep run's id (the sweep's `config_hash` names its
        settings)."""
        params = {"reduction_factor": rf, "learning_rate": lr, "seed": seed}
        run = open_trial_run(
            self.uri,
            self.experiment_id,
            parent,
            uid(f"{task}-rf{rf}-lr{lr:g}-s{seed}"),
            params={**params, "architecture": architecture},
            tags={TAG_TASK: task},
        )
        run.log_metrics({f"best_dev_{k}": v for k, v in metrics.items()})
        run.set_tags(params)
        return self._end(run, status)

    def fusion(
        self,
        target: str,
        lineage: str,
        seed: int,
        metrics: Mapping[str, float],
        weights: Sequence[Sequence[float]] | None = None,
        *,
        adapters: Sequence[str] = ("rte", "mrpc"),
        seed_as_tag: bool = True,
        pruned_from: str | None = None,
        status: str | None = "FINISHED",
        fusion_id: str | None = None,
    ) -> str:
        """A fusion run; `fusion_id`: the id its settings give it (`FusionPlan.trial_id`)."""
        tags: dict[str, Any] = {TAG_LINEAGE: lineage}
        if seed_as_tag:
            tags["seed"] = seed
        if pruned_from:
            tags[TAG_PRUNED_FROM] = pruned_from
        run = open_fusion_run(
            self.uri,
            self.experiment_id,
            target,
            fusion_id or uid("fusion"),
            params={"target": target, "adapters": lineage, "train.seed": seed},
            tags=tags,
        )
        return self._finish(run, metrics, weights, adapters, status)

    def baseline(
        self,
        system: str,
        task: str,
        seed: int,
        metrics: Mapping[str, float],
        weights: Sequence[Sequence[float]] | None = None,
        *,
        kind: str = "baseline",
        adapters: Sequence[str] = ("rte", "mrpc"),
        status: str | None = "FINISHED",
        params: Mapping[str, Any] | None = None,
        job_id: str | None = None,
    ) -> str:
        """A baseline run; `job_id`: the id its settings give it (`BaselineJob.job_id`)."""
        job_id = job_id or uid(system)
        run = open_baseline_run(
            self.uri, self.experiment_id, job_id, system, task, seed, params, kind=kind
        )
        return self._finish(run, metrics, weights, adapters, status)

    def _finish(
        self,
        run: MlflowRunLogger,
        metrics: Mapping[str, float],
        weights: Sequence[Sequence[float]] | None,
        adapters: Sequence[str],
        status: str | None,
    ) -> str:
        run.log_metrics({f"best_dev_{k}": v for k, v in metrics.items()})
        if weights is not None:
            folder = self.folder / uid("weights")
            folder.mkdir(parents=True)
            document = {"adapters": list(adapters), "weights": [list(w) for w in weights]}
            (folder / "fusion_weights.json").write_text(json.dumps(document))
            run.log_artifacts(folder)
        return self._end(run, status)

    @staticmethod
    def _end(run: MlflowRunLogger, status: str | None) -> str:
        if status is not None:  # None: left RUNNING
            run.end(status)
        time.sleep(0.01)  # distinct start times, so "newest" is well defined
        return run.run_id


def table1_pipeline_in(uri: str, folder: Path) -> Pipeline:
    """RTE, MRPC, SST-2 with every kind of run; see `test_report_table.py` for the numbers."""
    name = uid("table1")
    systems = ("head", "full", "st-a-houlsby", "mt-a", "fusion-mt-a")  # Full: no runs
    baselines = {system: ("rte", "mrpc") for system in systems}
    plan = StatusPlan(
        name, name, "accuracy", 4, ("rte", "mrpc", "sst2"), {"rte": ("rte", "mrpc")}, baselines, 2
    )
    tags = {
        **plan.to_tags(),
        "adapterfleet.budget": "cpu",
        "adapterfleet.budget_trimmed": json.dumps(BUDGET_TRIMMED),
    }
    p = Pipeline(uri, name, ensure_experiment(uri, name, tags=tags), folder)
    _sweeps(p)
    _fusions(p)
    _baselines(p)
    return p


def _sweeps(p: Pipeline) -> None:
    for seed, acc in enumerate([0.70, 0.72, 0.74]):
        p.trial("rte", 16, 1e-3, seed, {"accuracy": acc})
    for seed, acc in enumerate([0.75, 0.65]):
        p.trial("rte", 64, 1e-4, seed, {"accuracy": acc})
    p.trial("rte", 2, 1e-3, 0, {"accuracy": 0.99}, status="FAILED")
    p.trial("rte", 2, 1e-2, 0, {"accuracy": 0.98}, status=None)
    p.trial("rte", 16, 1e-4, 0, {"accuracy": 0.69}, architecture="houlsby")
    p.trial("mrpc", 16, 1e-3, 0, {"accuracy": 0.80, "f1": 0.86})
    p.trial("mrpc", 16, 1e-3, 1, {"accuracy": 0.84, "f1": 0.88})
    p.trial("mrpc", 16, 1e-3, 0, {"accuracy": 0.82, "f1": 0.87})  # a newer run of seed 0


def _fusions(p: Pipeline) -> None:
    p.fusion("rte", "rte:v1,mrpc:v1", 0, {"accuracy": 0.60}, [[1.0, 0.0], [1.0, 0.0]])
    p.fusion("rte", "rte:v2,mrpc:v1", 0, {"accuracy": 0.76}, [[0.6, 0.4], [0.2, 0.8]])
    p.fusion(
        "rte", "rte:v2,mrpc:v1", 1, {"accuracy": 0.78}, [[0.4, 0.6], [0.4, 0.6]], seed_as_tag=False
    )
    pruned = {"adapters": ("rte",), "pruned_from": "v2"}
    p.fusion("rte", "rte:v1", 0, {"accuracy": 0.99}, [[1.0], [1.0]], **pruned)
    p.fusion("rte", "rte:v3,mrpc:v1", 0, {"accuracy": 0.50}, status="FAILED")


def _baselines(p: Pipeline) -> None:
    p.baseline("head", "rte", 0, {"accuracy": 0.55})
    p.baseline("head", "rte", 1, {"accuracy": 0.51})  # an older job of seed 1
    p.baseline("head", "rte", 1, {"accuracy": 0.57})
    p.baseline("mt-a", "rte", 0, {"accuracy": 0.66})
    p.baseline("mt-a", "rte", 0, {"accuracy": 0.99}, kind="mt-a")  # the joint run: no cell
    p.baseline("fusion-mt-a", "rte", 0, {"accuracy": 0.79}, [[0.9, 0.1], [0.5, 0.5]])
    houlsby = {"reduction_factor": 16, "train.learning_rate": 1e-3}
    p.baseline("st-a-houlsby", "mrpc", 0, {"accuracy": 0.81}, params=houlsby)


def table_rows(text: str, after: str | None = None) -> dict[str, dict[str, str]]:
    """The first Markdown table of `text` (after the line `after`): row label -> column -> cell."""
    lines = text.splitlines()
    start = lines.index(after) if after else 0
    block = []
    for line in lines[start:]:
        if line.startswith("|"):
            block.append([cell.strip() for cell in line.strip().strip("|").split("|")])
        elif block:
            break
    header, rows = block[0], block[2:]
    return {row[0]: dict(zip(header[1:], row[1:], strict=True)) for row in rows}
