"""Stage 2 of the pipeline: a fusion for one target, gated by the registry.

The job waits until every adapter it fuses has the `best` alias (trained by this pipeline or by any
other job), pulls those exact versions and verifies their sha256, trains the fusion, logs the
fusion-weight heatmap (the paper's Figure 4 for this target) and registers
`<prefix>.fusion.<target>` with lineage tags naming the adapter versions. A fusion already
registered for the same adapter versions and settings is not trained again.

With several `fusion.seeds`, one fusion per seed is trained and registered (tagged `seed`),
and `best` points at the one with the best dev metric; each is found again by its lineage key,
so a re-run trains only the seeds that are missing.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from adapterfleet._locks import exclusive_lock
from adapterfleet.adapters import HEAD_WEIGHTS
from adapterfleet.config import PipelineConfig
from adapterfleet.fusion import FusionConfig, mean_fusion_weights, plot_fusion_heatmap
from adapterfleet.orchestration.epochs import CheckpointLogger
from adapterfleet.registry import (
    TAG_SEED,
    TAG_SYSTEM,
    TAG_TRIAL_ID,
    MlflowRunLogger,
    ModelVersionInfo,
    adapter_model_name,
    find_version_by_tag,
    fusion_model_name,
    open_fusion_run,
    pull,
    register_version,
    set_alias,
    wait_for_models,
)
from adapterfleet.registry.tags import TAG_LINEAGE, TAG_LINEAGE_KEY
from adapterfleet.training import TrainConfig
from adapterfleet.training.workdir import JobWorkdir

Say = Callable[[str], None]
FUSION_WEIGHTS_FILE = "model_adapter_fusion.safetensors"


@dataclass(frozen=True)
class FusionOutcome:
    target: str
    version: ModelVersionInfo
    dev_metrics: dict[str, float]
    trained: bool  # False: it was registered already for these adapters
    wait_seconds: float  # from the job's start until all its adapters were found
    start_delay: float  # from the last adapter's registration until training began


class _FusionReporter(CheckpointLogger):
    """The epoch logger, plus how long after the last adapter's registration the first step
    came (`first_step_delay_s`)."""

    def __init__(
        self, logger: MlflowRunLogger, workdir: JobWorkdir, registered_at: float | None
    ) -> None:
        super().__init__(logger, workdir)
        self.registered_at = registered_at

    def on_train_start(self) -> None:
        if self.registered_at is not None:
            self.logger.log_metrics({"first_step_delay_s": time.time() - self.registered_at})


def lineage_key(config: PipelineConfig, target: str, versions: dict[str, ModelVersionInfo]) -> str:
    """Identifies a fusion by what it was trained from: adapter versions + hashes + settings."""
    payload = {
        "target": target,
        "task": config.tasks[target].to_mapping(),
        "base_model": config.base_model,
        "preset": config.fusion.preset,
        "training": _result_settings(config.fusion.training),
        "adapters": {t: [v.version, v.sha256] for t, v in sorted(versions.items())},
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()


def _result_settings(training: TrainConfig) -> dict[str, object]:
    """The training settings that change the trained fusion (not how progress is shown)."""
    return {k: v for k, v in training.hash_dict().items() if k != "progress"}


@dataclass(frozen=True)
class FusionPlan:
    """What a fusion for `target` is trained from, found before any training starts."""

    target: str
    versions: dict[str, ModelVersionInfo]  # task -> the registered adapter version
    key: str  # lineage key: same key, same fusion
    lineage: str  # "task:vN,..." in the config's order
    existing: ModelVersionInfo | None  # the fusion already registered for this key, if any

    @property
    def trial_id(self) -> str:
        return f"fusion-{self.target}-{self.key[:12]}"


def plan_fusion(
    config: PipelineConfig, target: str, uri: str, versions: dict[str, ModelVersionInfo]
) -> FusionPlan:
    """The lineage of a fusion over `versions` (with `config.fusion.training`'s seed), and its
    registered version if it exists."""
    key = lineage_key(config, target, versions)
    lineage = ",".join(f"{t}:v{versions[t].version}" for t in config.fusion.targets[target])
    name = fusion_model_name(config.registry_prefix, target)
    existing = find_version_by_tag(uri, name, TAG_LINEAGE_KEY, key)
    return FusionPlan(target, versions, key, lineage, existing)


def seed_configs(config: PipelineConfig) -> list[PipelineConfig]:
    """The config of each fusion seed: `fusion.training` with that seed."""
    stage = config.fusion
    return [
        replace(config, fusion=replace(stage, training=replace(stage.training, seed=seed)))
        for seed in stage.fusion_seeds
    ]


def open_plan_run(
    config: PipelineConfig, plan: FusionPlan, uri: str, experiment_id: str
) -> MlflowRunLogger:
    """The MLflow run of the fusion: created on the first call, reopened on later ones (the
    pipeline's gate opens it the moment the adapters are found, the Ray task reopens it)."""
    params = {
        "target": plan.target,
        "adapters": plan.lineage,
        "preset": config.fusion.preset,
        **{f"train.{k}": v for k, v in config.fusion.training.to_dict().items()},
    }
    return open_fusion_run(
        uri,
        experiment_id,
        plan.target,
        plan.trial_id,
        params=params,
        tags={
            TAG_LINEAGE: plan.lineage,
            TAG_SYSTEM: "fusion-st-a",
            TAG_SEED: config.fusion.training.seed,
        },
    )


def run_fusion_job(
    config: PipelineConfig,
    target: str,
    uri: str,
    experiment_id: str,
    *,
    timeout_s: float = 24 * 3600,
    poll_s: float = 2.0,
    warm: bool = False,
    say: Say = print,
) -> FusionOutcome:
    """Wait for the target's adapters, then train and register its fusion (or find it
    registered). With `warm`, first import the training code, tokenise the target and load the
    base model, then poll every second: a job started before its last adapter is registered
    takes its first step seconds after it."""
    import torch

    torch.set_num_threads(max(1, int(config.resources.cpu)))
    if warm:
        _warm_up(config, target)
        poll_s, max_poll_s = 0.5, 1.0
    else:
        max_poll_s = 5.0

    sources = config.fusion.targets[target]
    names = {adapter_model_name(config.registry_prefix, t): t for t in sources}
    started = time.time()

    shown: list[set[str]] = [set()]

    def progress(missing: list[str]) -> None:
        if missing and set(missing) != shown[0]:  # say it again only when the set changes
            say(f"fusion {target}: waiting for {', '.join(sorted(names[m] for m in missing))}")
        shown[0] = set(missing)

    found = wait_for_models(
        uri, list(names), "best", timeout_s, poll_s, progress, max_poll_s=max_poll_s
    )
    waited = time.time() - started
    versions = {names[n]: info for n, info in found.items()}
    seeds = seed_configs(config)
    if len(seeds) == 1:
        return _fusion_for_seed(config, target, uri, experiment_id, versions, waited, say, "best")
    outcomes = [
        _fusion_for_seed(seeded, target, uri, experiment_id, versions, waited, say, None)
        for seeded in seeds
    ]
    metric = config.fusion.training.metric
    best = max(outcomes, key=lambda o: o.dev_metrics.get(metric, float("-inf")))
    set_alias(uri, best.version.name, "best", best.version.version)
    say(
        f"fusion {target}: best of {len(outcomes)} seeds is v{best.version.version} "
        f"(seed {best.version.tags.get(TAG_SEED)}, {metric} {best.dev_metrics.get(metric, 0):.4f})"
    )
    return best


def _fusion_for_seed(
    config: PipelineConfig,
    target: str,
    uri: str,
    experiment_id: str,
    versions: dict[str, ModelVersionInfo],
    waited: float,
    say: Say,
    alias: str | None,
) -> FusionOutcome:
    """The fusion over `versions` with `config`'s seed: found registered, or trained now."""
    key = lineage_key(config, target, versions)
    work = Path(config.storage).resolve() / "fusion" / target / key[:12]
    with training_claim(work, lambda: say(f"fusion {target}: another job trains it; waiting")):
        plan = plan_fusion(config, target, uri, versions)  # again: the other job may be done
        if plan.existing is not None:
            existing = plan.existing
            say(f"fusion {target}: already registered as v{existing.version} for these adapters")
            if alias:
                set_alias(uri, existing.name, alias, existing.version)
            tags = existing.tags
            metrics = {k[4:]: float(v) for k, v in tags.items() if k.startswith("dev_")}
            return FusionOutcome(target, existing, metrics, False, waited, 0.0)
        return _train_and_register(config, plan, uri, experiment_id, work, waited, say, alias=alias)


def _warm_up(config: PipelineConfig, target: str) -> None:
    """What a fusion job does before its first step that needs no adapter: the imports, the
    target's tokenised splits (into the shared cache) and one load of the base model (files
    into the page cache, the model classes imported)."""
    from adapterfleet.adapters.base_model import load_encoder
    from adapterfleet.orchestration.local import prepare_task
    from adapterfleet.training.modes import train_fusion_run  # noqa: F401 - the import is the work

    prepare_task(config, target)
    load_encoder(config.base_model)


def write_fusion_weights(
    model: Any, target: str, sources: list[str], dev: Any, folder: Path
) -> None:
    """The mean fusion weight per layer and adapter on the dev set (the paper's Figure 4 for
    `target`): `fusion_weights.json` (`adapters`, `weights[layer][adapter]`) and a heatmap."""
    weights = mean_fusion_weights(model, target, dev)
    title = f"{target}: mean fusion weight per layer"
    plot_fusion_heatmap(weights, sources, folder / "fusion_weights.png", title)
    (folder / "fusion_weights.json").write_text(
        json.dumps({"adapters": sources, "weights": weights.tolist()}, indent=1)
    )


@contextmanager
def training_claim(work: Path, on_wait: Callable[[], None]) -> Iterator[None]:
    """Hold the lock of a fusion's work folder (on the pipeline's shared storage) while it
    trains: a second job for the same lineage waits here, then finds it registered."""
    with exclusive_lock(work / ".training.lock", on_wait):
        yield


def _train_and_register(
    config: PipelineConfig,
    plan: FusionPlan,
    uri: str,
    experiment_id: str,
    work: Path,
    waited: float,
    say: Say,
    *,
    alias: str | None = "best",
    tags: dict[str, str] | None = None,
    gated: bool = True,
) -> FusionOutcome:
    """Pull the plan's adapters, train (resuming from the newest checkpoint in `work`), log the
    weights heatmap and register the fusion under `alias` (None: no alias) with lineage tags
    and `tags`.
    `gated`: the job waited for the adapters, so the delays since their registration are
    logged."""
    from adapterfleet.orchestration.local import prepare_task
    from adapterfleet.training.modes import task_batches, train_fusion_run
    from adapterfleet.tuning.trial import relog_missing_epochs

    target, versions, key, lineage = plan.target, plan.versions, plan.key, plan.lineage
    sources = config.fusion.targets[target]
    fusion_name = fusion_model_name(config.registry_prefix, target)
    logger = open_plan_run(config, plan, uri, experiment_id)
    if tags:
        logger.set_tags(tags)
    try:
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
        workdir = JobWorkdir(work)
        start = workdir.latest_checkpoint()
        if start is not None:
            relog_missing_epochs(logger, start[1])
            say(f"fusion {target}: resuming after epoch {start[0]}")
        registered_at = max(v.created_ms for v in versions.values()) / 1000.0
        start_delay = time.time() - registered_at
        if gated:
            after = f"{start_delay:.1f}s after the last adapter"
            say(f"fusion {target}: training over {lineage} ({after})")
            logger.log_metrics({"training_start_delay_s": start_delay})
        else:
            say(f"fusion {target}: training over {lineage}")
        run = train_fusion_run(
            tokenized,
            config.base_model,
            dirs,
            config.fusion.training,
            work / "run",
            fusion_config=FusionConfig.preset(config.fusion.preset),
            adapter_sha256=[versions[t].sha256 for t in sources],
            metrics=config.tasks[target].metrics,
            callbacks=[_FusionReporter(logger, workdir, registered_at if gated else None)],
            resume_from=start[1] if start is not None else None,
        )
        _, dev = task_batches(tokenized, config.fusion.training)
        write_fusion_weights(run.model, target, list(sources), dev, work / "run")
        logger.log_metrics({f"best_dev_{k}": v for k, v in run.dev_metrics.items()})
        logger.log_artifacts(work / "run", "")
        version = register_version(
            uri,
            fusion_name,
            logger.run_id,
            "fusion",
            work / "run" / "fusion" / FUSION_WEIGHTS_FILE,
            tags={
                TAG_TRIAL_ID: plan.trial_id,
                TAG_LINEAGE: lineage,
                TAG_LINEAGE_KEY: key,
                "base_model": config.base_model,
                "metric": config.fusion.training.metric,
                TAG_SEED: config.fusion.training.seed,
                **{f"dev_{k}": v for k, v in run.dev_metrics.items()},
                **{f"adapter.{t}": f"v{versions[t].version}" for t in sources},
                **(tags or {}),
            },
            alias=alias,
            companions={"head": work / "run" / "head" / HEAD_WEIGHTS},
        )
    except BaseException:
        logger.end("FAILED")
        raise
    logger.end("FINISHED")
    workdir.clear_checkpoints()  # registered: a rerun finds the version, never resumes this
    say(
        f"fusion {target}: registered {fusion_name} v{version.version} "
        f"({config.fusion.training.metric} {run.dev_metrics[config.fusion.training.metric]:.4f})"
    )
    return FusionOutcome(target, version, run.dev_metrics, True, waited, start_delay)
