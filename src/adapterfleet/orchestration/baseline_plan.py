"""The jobs of the baselines stage, planned from the config before anything runs: one per
system, task and seed (MT-A: one per seed over every adapter task), each named by a job id that
hashes everything that decides its result. No torch here: `report -c` plans them too, to tell
this config's runs from those of other settings."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from adapterfleet.config import PipelineConfig
from adapterfleet.tuning.spec import data_sha256, task_identity

ALL_TASKS = "all"  # the task of an MT-A job: every adapter task


@dataclass(frozen=True)
class BaselineJob:
    system: str
    task: str  # ALL_TASKS for mt-a
    seed: int
    key: str  # sha256 of everything that decides the result

    @property
    def job_id(self) -> str:
        return f"{self.system}-{self.task}-s{self.seed}-{self.key[:12]}"

    @property
    def label(self) -> str:
        return f"{self.system} {self.task} seed {self.seed}"


def _digest(payload: Any) -> str:
    text = json.dumps(payload, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def plan_baselines(config: PipelineConfig) -> list[BaselineJob]:
    """Every job of the stage, MT-A jobs first (fusion-mt-a waits on them)."""
    stage = config.baselines
    common = {"base_model": config.base_model, "max_length": config.max_length}
    mt_tasks = config.adapter_tasks
    data = {t: data_sha256(config, t) for t in {*mt_tasks, *stage.tasks}}  # None: a hub dataset
    mt_keys = {
        seed: _digest(
            {
                **common,
                "system": "mt-a",
                "seed": seed,
                "tasks": {t: task_identity(config, t) for t in mt_tasks},
                "data": {t: data[t] for t in mt_tasks},
                "reduction_factor": stage.reduction_factor,
                "training": _settings(stage.training_for("mt-a")),
            }
        )
        for seed in stage.seeds
    }
    jobs = [BaselineJob("mt-a", ALL_TASKS, s, mt_keys[s]) for s in stage.seeds]
    jobs = jobs if "mt-a" in stage.systems else []
    for system in stage.systems:
        if system == "mt-a":
            continue
        for task in stage.tasks:
            for seed in stage.seeds:
                payload: dict[str, Any] = {
                    **common,
                    "system": system,
                    "seed": seed,
                    "task": task_identity(config, task),
                    "data": data[task],
                    "training": _settings(stage.training_for(system, task)),
                }
                if system == "st-a-houlsby":
                    payload["reduction_factor"] = stage.reduction_factor
                if system == "fusion-mt-a":
                    payload["mt_a"] = mt_keys[seed]
                    payload["adapters"] = list(config.fusion.targets[task])
                    payload["preset"] = config.fusion.preset
                jobs.append(BaselineJob(system, task, seed, _digest(payload)))
    return jobs


def _settings(training: Any) -> dict[str, Any]:
    return {k: v for k, v in training.hash_dict().items() if k != "progress"}
