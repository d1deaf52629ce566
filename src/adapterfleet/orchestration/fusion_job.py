"""Stage 2 of the pipeline: a fusion for one target, gated by the registry.

The job waits until every adapter it fuses has the `best` alias (trained by this pipeline or by any
other job), pulls those exact versions and verifies their sha256, trains the fusion, logs the
fusion-weight heatmap (the paper's Figure 4 for this target) and registers
`<prefix>.fusion.<target>` with lineage tags naming the adapter versions. A fusion already
registered for the same adapter versions and settings is not trained again.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from adapterfleet.config import PipelineConfig
from adapterfleet.fusion import FusionConfig, mean_fusion_weights, plot_fusion_heatmap
from adapterfleet.registry import (
    TAG_TRIAL_ID,
    MlflowRunLogger,
    ModelVersionInfo,
    adapter_model_name,
    fusion_model_name,
    get_version,
    open_fusion_run,
    pull,
    register_version,
    wait_for_models,
)
from adapterfleet.training import Callback, EpochReport

Say = Callable[[str], None]
TAG_LINEAGE = "adapterfleet.lineage"
TAG_LINEAGE_KEY = "adapterfleet.lineage_key"
FUSION_WEIGHTS_FILE = "model_adapter_fusion.safetensors"


@dataclass(frozen=True)
class FusionOutcome:
    target: str
    version: ModelVersionInfo
    dev_metrics: dict[str, float]
    trained: bool  # False: it was registered already for these adapters
    wait_seconds: float  # from the job's start until all its adapters were found
    start_delay: float  # from the last adapter's registration until training began


class _MlflowEpochs(Callback):
    def __init__(self, logger: MlflowRunLogger):
        self.logger = logger

    def on_epoch_end(self, report: EpochReport) -> None:
        metrics = {
            "train_loss": report.train_loss,
            "learning_rate": report.learning_rate,
            **{f"dev_{k}": v for k, v in report.dev_metrics.items()},
        }
        self.logger.log_metrics(metrics, step=report.epoch)


def lineage_key(config: PipelineConfig, target: str, versions: dict[str, ModelVersionInfo]) -> str:
    """Identifies a fusion by what it was trained from: adapter versions + hashes + settings."""
    payload = {
        "target": target,
        "task": config.tasks[target].to_mapping(),
        "base_model": config.base_model,
        "preset": config.fusion.preset,
        "training": config.fusion.training.to_dict(),
        "adapters": {t: [v.version, v.sha256] for t, v in sorted(versions.items())},
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()


def run_fusion_job(
    config: PipelineConfig,
    target: str,
    uri: str,
    experiment_id: str,
    *,
    timeout_s: float = 24 * 3600,
    poll_s: float = 2.0,
    say: Say = print,
) -> FusionOutcome:
    import torch

    from adapterfleet.orchestration.local import prepare_task
    from adapterfleet.training.modes import task_batches, train_fusion_run

    torch.set_num_threads(max(1, int(config.resources.cpu)))

    sources = config.fusion.targets[target]
    names = {adapter_model_name(config.registry_prefix, t): t for t in sources}
    started = time.time()

    shown: list[set[str]] = [set()]

    def progress(missing: list[str]) -> None:
        if missing and set(missing) != shown[0]:  # say it again only when the set changes
            say(f"fusion {target}: waiting for {', '.join(sorted(names[m] for m in missing))}")
        shown[0] = set(missing)

    found = wait_for_models(uri, list(names), "best", timeout_s, poll_s, progress, max_poll_s=5)
    ready = time.time()
    versions = {names[n]: info for n, info in found.items()}
    key = lineage_key(config, target, versions)
    fusion_name = fusion_model_name(config.registry_prefix, target)
    existing = get_version(uri, fusion_name, alias="best")
    if existing is not None and existing.tags.get(TAG_LINEAGE_KEY) == key:
        say(f"fusion {target}: already registered as v{existing.version} for these adapters")
        metrics = {k[4:]: float(v) for k, v in existing.tags.items() if k.startswith("dev_")}
        return FusionOutcome(target, existing, metrics, False, ready - started, 0.0)
    trial_id = f"fusion-{target}-{key[:12]}"
    lineage = ",".join(f"{t}:v{versions[t].version}" for t in sources)
    params = {
        "target": target,
        "adapters": lineage,
        "preset": config.fusion.preset,
        **{f"train.{k}": v for k, v in config.fusion.training.to_dict().items()},
    }
    logger = open_fusion_run(
        uri, experiment_id, target, trial_id, params=params, tags={TAG_LINEAGE: lineage}
    )
    try:
        work = Path(config.storage).resolve() / "fusion" / target / key[:12]
        dirs = [
            pull(
                uri,
                adapter_model_name(config.registry_prefix, t),
                work / "adapters" / t,
                version=versions[t].version,
            )
            for t in sources
        ]
        tokenized = prepare_task(config, target)
        registered_at = max(v.created_ms for v in versions.values()) / 1000.0
        start_delay = time.time() - registered_at
        say(f"fusion {target}: training over {lineage} ({start_delay:.1f}s after the last adapter)")
        run = train_fusion_run(
            tokenized,
            config.base_model,
            dirs,
            config.fusion.training,
            work / "run",
            fusion_config=FusionConfig.preset(config.fusion.preset),
            adapter_sha256=[versions[t].sha256 for t in sources],
            metrics=config.tasks[target].metrics,
            callbacks=[_MlflowEpochs(logger)],
        )
        _, dev = task_batches(tokenized, config.fusion.training)
        weights = mean_fusion_weights(run.model, target, dev)
        plot_fusion_heatmap(
            weights,
            list(sources),
            work / "run" / "fusion_weights.png",
            f"{target}: mean fusion weight per layer",
        )
        (work / "run" / "fusion_weights.json").write_text(
            json.dumps({"adapters": list(sources), "weights": weights.tolist()}, indent=1)
        )
        logger.log_metrics({f"best_dev_{k}": v for k, v in run.dev_metrics.items()})
        logger.log_artifacts(work / "run", "")
        version = register_version(
            uri,
            fusion_name,
            logger.run_id,
            "fusion",
            work / "run" / "fusion" / FUSION_WEIGHTS_FILE,
            tags={
                TAG_TRIAL_ID: trial_id,
                TAG_LINEAGE: lineage,
                TAG_LINEAGE_KEY: key,
                "base_model": config.base_model,
                "metric": config.fusion.training.metric,
                **{f"dev_{k}": v for k, v in run.dev_metrics.items()},
                **{f"adapter.{t}": f"v{versions[t].version}" for t in sources},
            },
        )
    except BaseException:
        logger.end("FAILED")
        raise
    logger.end("FINISHED")
    say(
        f"fusion {target}: registered {fusion_name} v{version.version} "
        f"({config.fusion.training.metric} {run.dev_metrics[config.fusion.training.metric]:.4f})"
    )
    return FusionOutcome(target, version, run.dev_metrics, True, ready - started, start_delay)
