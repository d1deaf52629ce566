"""Processes for the concurrency fault test.

python fault_driver.py fuse CONFIG TARGET URI EXPERIMENT_ID
    run_fusion_job; prints `OUTCOME {"version": n, "trained": bool}`.
python fault_driver.py register URI NAME RUN_ID WEIGHTS TRIAL_ID TASK GATE
    after imports, touches GATE.<pid>.ready and waits for GATE to exist (so that several
    processes call register_version at the same moment); prints `VERSION n`.
python fault_driver.py sweep CONFIG ADDRESS
    the adapter stage on the Ray cluster at ADDRESS (max_failures 3); prints
    `REGISTERED <task> <name> v<version>` per task.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
GATE_DEADLINE_S = 300.0


def fuse(config_path: str, target: str, uri: str, experiment_id: str) -> None:
    from adapterfleet.config import load_config
    from adapterfleet.orchestration.fusion_job import run_fusion_job

    config = load_config(config_path)
    outcome = run_fusion_job(config, target, uri, experiment_id, timeout_s=600, poll_s=0.5)
    print("OUTCOME " + json.dumps({"version": outcome.version.version, "trained": outcome.trained}))


def register(
    uri: str, name: str, run_id: str, weights: str, trial_id: str, task: str, gate: str
) -> None:
    from adapterfleet.registry import TAG_TASK, TAG_TRIAL_ID, register_version

    Path(f"{gate}.{os.getpid()}.ready").touch()
    deadline = time.monotonic() + GATE_DEADLINE_S
    while not Path(gate).exists():
        if time.monotonic() > deadline:
            raise SystemExit("the gate never opened")
        time.sleep(0.01)
    tags = {TAG_TRIAL_ID: trial_id, TAG_TASK: task}
    info = register_version(uri, name, run_id, "adapter", weights, tags)
    print(f"VERSION {info.version}", flush=True)


def sweep(config_path: str, address: str) -> None:
    from adapterfleet.config import load_config
    from adapterfleet.orchestration.sweep import run_adapter_stage

    registered = run_adapter_stage(load_config(config_path), ray_address=address, max_failures=3)
    for task, info in sorted(registered.items()):
        print(f"REGISTERED {task} {info.name} v{info.version}", flush=True)


def main() -> int:
    command, args = sys.argv[1], sys.argv[2:]
    if command == "fuse":
        fuse(*args)
    elif command == "register":
        register(*args)
    elif command == "sweep":
        sweep(*args)
    else:
        raise SystemExit(f"unknown command {command}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
