"""Issue #6: two fusion jobs wait on the same adapters, and each adapter is then registered by two
processes at the same moment (as when a driver and its retry both register a trial). The registry
stays consistent: one version per trial, `best` on it, and one fusion version for the one lineage
both jobs see, tagged with that lineage."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import IO

import pytest
from fault_support import RestartableMlflowServer, wait_for
from tuning_support import (
    config_document,
    metric_steps,
    mlflow_client,
    runs_of,
    version_numbers,
    write_config,
)

from adapterfleet.config import PipelineConfig, load_config
from adapterfleet.orchestration.fusion_plan import lineage_key
from adapterfleet.registry import (
    TAG_TASK,
    RegistryError,
    ensure_experiment,
    fusion_model_name,
    get_version,
    open_trial_run,
    pull,
)
from adapterfleet.registry.tags import TAG_LINEAGE, TAG_LINEAGE_KEY

pytestmark = pytest.mark.integration
DRIVER = Path(__file__).with_name("fault_driver.py")
TARGET = "fruit"
TASKS = ("fruit", "water")
WAITING_DEADLINE_S = 240.0
REGISTER_DEADLINE_S = 300.0
FUSION_DEADLINE_S = 600.0


def write_fusion_config(root: Path, model: Path, uri: str) -> Path:
    document = config_document(root, model)
    document["tracking_uri"] = uri
    training = {"max_epochs": 2, "batch_size": 16, "learning_rate": 0.01, "device": "cpu"}
    document["fusion"] = {"targets": {TARGET: "all"}, "training": training}
    return write_config(root, document)


def log_adapter(
    config: PipelineConfig, uri: str, experiment_id: str, task: str, folder: Path
) -> tuple[str, str, Path]:
    """A fresh adapter for `task` on the config's base model, logged as artifact `adapter` of
    a new trial run. Returns (trial id, run id, local weights file)."""
    from adapterfleet.adapters import (
        ADAPTER_WEIGHTS,
        AdapterConfig,
        AdapterModel,
        add_adapter,
        load_encoder,
        save_adapter,
    )

    model = AdapterModel(load_encoder(config.base_model))
    add_adapter(model, task, AdapterConfig("pfeiffer", reduction_factor=4))
    save_adapter(model, task, folder)
    trial_id = f"{task}-rf4-lr0.01-s0"
    run = open_trial_run(uri, experiment_id, None, trial_id, tags={TAG_TASK: task})
    run.log_artifacts(folder, "adapter")
    run.end()
    return trial_id, run.run_id, folder / ADAPTER_WEIGHTS


class Processes:
    """Driver processes with their output in files; whatever is left is killed at the end."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.procs: list[tuple[subprocess.Popen[bytes], Path, IO[bytes]]] = []

    def spawn(self, label: str, *args: str) -> int:
        log_path = self.folder / f"{label}.log"
        log = open(log_path, "wb")  # noqa: SIM115 - closed in close()
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        proc = subprocess.Popen(
            [sys.executable, "-u", str(DRIVER), *args],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
        self.procs.append((proc, log_path, log))
        return len(self.procs) - 1

    def output(self, index: int) -> str:
        return self.procs[index][1].read_text(errors="replace")

    def wait(self, index: int, timeout_s: float) -> str:
        proc = self.procs[index][0]
        proc.wait(timeout=timeout_s)
        output = self.output(index)
        assert proc.returncode == 0, output[-4000:]
        return output

    def close(self) -> None:
        for proc, _, log in self.procs:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                proc.wait(timeout=30)
            log.close()


def line_value(output: str, prefix: str) -> str:
    return next(line[len(prefix) :] for line in output.splitlines() if line.startswith(prefix))


def test_concurrent_fusion_jobs_and_registrations_keep_the_registry_consistent(
    tiny_model: Path, tmp_path: Path, restartable_mlflow_server: RestartableMlflowServer
) -> None:
    uri = restartable_mlflow_server.uri
    config_path = write_fusion_config(tmp_path, tiny_model, uri)
    config = load_config(config_path)
    experiment_id = ensure_experiment(uri, config.name)
    procs = Processes(tmp_path)
    try:
        fusers = [
            procs.spawn(f"fuse{i}", "fuse", str(config_path), TARGET, uri, experiment_id)
            for i in (1, 2)
        ]
        for index in fusers:  # both are waiting on the registry before any adapter exists
            wait_for(
                "the fusion jobs to wait on the registry",
                lambda i=index: (
                    "waiting for fruit, water" in procs.output(i)
                    or procs.procs[i][0].poll() is not None
                ),
                WAITING_DEADLINE_S,
                0.5,
            )
            assert procs.procs[index][0].poll() is None, procs.output(index)

        gate = tmp_path / "gate"
        registrars: dict[str, list[int]] = {}
        trial_ids: dict[str, str] = {}
        for task in TASKS:
            trial_id, run_id, weights = log_adapter(
                config, uri, experiment_id, task, tmp_path / "adapters" / task
            )
            trial_ids[task] = trial_id
            name = f"{config.registry_prefix}.adapter.{task}"
            args = (uri, name, run_id, str(weights), trial_id, task, str(gate))
            registrars[task] = [procs.spawn(f"reg-{task}{i}", "register", *args) for i in (1, 2)]
        wait_for(
            "the registering processes to be ready",
            lambda: len(list(tmp_path.glob("gate.*.ready"))) == 4,
            REGISTER_DEADLINE_S,
            0.1,
        )
        gate.touch()  # all four call register_version now
        registered = {
            task: {line_value(procs.wait(i, REGISTER_DEADLINE_S), "VERSION ") for i in indices}
            for task, indices in registrars.items()
        }
        outcomes = [
            json.loads(line_value(procs.wait(i, FUSION_DEADLINE_S), "OUTCOME ")) for i in fusers
        ]
    finally:
        procs.close()
    for index in fusers:
        print(procs.output(index)[-1500:])
    print(f"registered {registered}; fusion outcomes {outcomes}")

    client = mlflow_client(uri)
    versions = {}
    for task in TASKS:  # one version per trial, whoever registered it
        name = f"{config.registry_prefix}.adapter.{task}"
        assert registered[task] == {"1"}, registered
        assert version_numbers(uri, name) == [1]
        best = get_version(uri, name, alias="best")
        assert best is not None and best.version == 1
        assert best.tags["adapterfleet.trial_id"] == trial_ids[task]
        versions[task] = best

    fusion_name = fusion_model_name(config.registry_prefix, TARGET)
    assert version_numbers(uri, fusion_name) == [1], "the one lineage was registered twice"
    assert [o["version"] for o in outcomes] == [1, 1]
    assert sum(o["trained"] for o in outcomes) == 1  # the other found it registered
    fusion = get_version(uri, fusion_name, alias="best")
    assert fusion is not None and fusion.version == 1
    assert fusion.tags[TAG_LINEAGE_KEY] == lineage_key(config, TARGET, versions)
    assert fusion.tags[TAG_LINEAGE] == "fruit:v1,water:v1"
    assert fusion.tags["adapter.fruit"] == "v1" and fusion.tags["adapter.water"] == "v1"
    assert client.get_run(fusion.run_id).info.status == "FINISHED"
    fusion_runs = runs_of(uri, "fusion")
    print(f"fusion runs: {[(r.info.run_id, r.info.status) for r in fusion_runs]}")
    assert len(fusion_runs) == 1  # one run per lineage (the fusion's trial id)

    problems = []  # what a user of fusion v1 relies on; both listed when both fail
    try:  # the registered sha256 is that of the artifact the version points at
        pull(uri, fusion_name, tmp_path / "pulled")
    except RegistryError as error:
        problems.append(f"pull of {fusion_name} v1 fails: {error}")
    steps = metric_steps(uri, fusion.run_id, "dev_accuracy")
    if steps != [1, 2]:  # the lineage trained once: each epoch logged once
        problems.append(f"the fusion run holds epochs {steps} (both jobs trained into it)")
    assert not problems, problems
