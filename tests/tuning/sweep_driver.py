"""Run the adapter stage of a pipeline YAML in its own process (the kill test's driver).

python sweep_driver.py PIPELINE.yaml [--resume] [--num-cpus N]
"""

from __future__ import annotations

import argparse
import os
import sys

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("config")
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--num-cpus", type=int, default=2)
    args = parser.parse_args()

    from adapterfleet.config import load_config
    from adapterfleet.orchestration.sweep import resume_sweep, run_adapter_stage

    config = load_config(args.config)
    run = resume_sweep if args.resume else run_adapter_stage
    registered = run(config, ray_address="local", num_cpus=args.num_cpus)
    for task, info in sorted(registered.items()):
        print(f"REGISTERED {task} {info.name} v{info.version} {info.sha256}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
