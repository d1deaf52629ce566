"""Stage 2 of the pipeline: a fusion for one target, gated by the registry.

The job waits until every adapter it fuses has the `best` alias (trained by this pipeline or by any
other job), pulls those exact versions and verifies their sha256, trains the fusion, logs the
fusion-weight heatmap (the paper's Figure 4 for this target) and registers
`<prefix>.fusion.<target>` with lineage tags naming the adapter versions. A fusion already
registered for the same adapter versions and settings is not trained again.

With several `fusion.seeds`, one fusion per seed is trained and registered (tagged `seed`),
and `best` points at the one with the best dev metric; each is found again by its lineage key,
so a re-run trains only the seeds that are missing. `best` moves to a new fusion only when the
version it is on did not score better on the same dev metric: a quick `fuse --wait --epochs 1`
registers its fusion without taking `best` from a better one.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

import torch

from adapterfleet._locks import exclusive_lock
from adapterfleet.adapters import HEAD_WEIGHTS, load_encoder
from adapterfleet.config import PipelineConfig
from adapterfleet.console import Say
from adapterfleet.data.baseline import Chance, dev_chance
from adapterfleet.fusion import FUSION_WEIGHTS
from adapterfleet.orchestration.fusion_plan import (
    FUSION_LOCK,
    FusionPlan,
    current_adapter,
    fusion_work,
    lineage_key,
    open_plan_run,
    plan_fusion,
    pullable_adapter,
    say_not_current,
    seed_configs,
)
from adapterfleet.orchestration.fusion_training import FusionTraining
from adapterfleet.orchestration.local import prepare_task
from adapterfleet.registry import (
    TAG_SEED,
    TAG_TASK,
    TAG_TRIAL_ID,
    ModelVersionInfo,
    adapter_model_name,
    fusion_model_name,
    get_version,
    pull,
    register_version,
    set_alias,
    wait_for_models,
)
from adapterfleet.registry import descriptions as notes
from adapterfleet.registry.purged import purged_text
from adapterfleet.registry.ranking import unranked_reason
from adapterfleet.registry.tags import (
    BEST_ALIAS,
    TAG_BASE_MODEL_DTYPE,
    TAG_BASE_MODEL_LAYOUT,
    TAG_DATA_SHA256,
    TAG_LINEAGE,
    TAG_LINEAGE_KEY,
)
from adapterfleet.training import JobWorkdir, end_quietly, ended_by, log_best
from adapterfleet.training.metrics import metric_direction, signed
from adapterfleet.training.modes import RunResult
from adapterfleet.tuning.spec import data_sha256, layout_tag


@dataclass(frozen=True)
class FusionOutcome:
    target: str
    version: ModelVersionInfo
    dev_metrics: dict[str, float]
    trained: bool  # False: it was registered already for these adapters
    wait_seconds: float  # from the job's start until all its adapters were found
    start_delay: float  # from the last adapter's registration until training began (or 0.0)
    best_kept: ModelVersionInfo | None = None  # `best` stayed on this version: better on dev
    best_was: str | None = None  # the version `best` left for this one (None: it was here)
    # why that version was not ranked against this one: "a fusion on <its base>", "a fusion
    # on other data of <target>" (dev scores of two bases or two dev files rank neither)
    best_was_apart: str | None = None
    chance: Chance | None = None  # what learning nothing scores on the target's dev split
    stopped: str = ""  # `, patience 3 ended it at epoch 4/9` when early stopping ended it


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
    current_only: bool = False,
    since: float | None = None,
) -> FusionOutcome:
    """Wait for the target's adapters, then train and register its fusion (or find it
    registered). With `warm`, first tokenise the target and load the base model, then poll
    every second: a job started before its last adapter is registered takes its first step
    seconds after it. `current_only` (the pipeline's): an adapter's `best` version counts only
    once registered for the config's settings and data, not an older one its sweep replaces.
    `since`: when the pipeline began (default: now); the delays from the last adapter's
    registration to training are logged only for one registered after it, not by a run before."""
    torch.set_num_threads(max(1, int(config.resources.cpu)))
    config = replace(config, fusion=config.fusion.for_target(target))  # the target's metric
    if warm:
        _warm_up(config, target)
    poll_s, max_poll_s = (0.5, 1.0) if warm else (poll_s, 5.0)
    names = {
        adapter_model_name(config.registry_prefix, t): t for t in config.fusion.targets[target]
    }
    started = time.time()
    since = started if since is None else since

    shown: list[set[str]] = [set()]

    def progress(missing: list[str]) -> None:
        if missing and set(missing) != shown[0]:  # say it again only when the set changes
            say(f"fusion {target}: waiting for {', '.join(sorted(names[m] for m in missing))}")
        shown[0] = set(missing)

    # the pipeline's: registered for its current settings; `fuse --wait`'s: its run still there
    accept = current_adapter(config, names, uri) if current_only else None
    found = wait_for_models(
        uri, list(names), BEST_ALIAS, timeout_s, poll_s, progress, max_poll_s=max_poll_s,
        accept=accept or pullable_adapter(uri, target, say),
    )  # fmt: skip
    waited = time.time() - started
    versions = {names[n]: info for n, info in found.items()}
    if not current_only:
        say_not_current(config, target, versions, say)
    seeds, metric = seed_configs(config), config.fusion.training.metric
    outcomes = []
    for seeded in seeds:  # a line per seed as it ends, when there are several
        outcome = _fusion_for_seed(seeded, target, uri, experiment_id, versions, waited, since, say)
        outcomes.append(outcome)
        if len(seeds) > 1:
            seed = seeded.fusion.training.seed
            say(f"fusion {target}: seed {seed} {registered_text(outcome, metric)}")
    best = point_best(uri, _best_seed(outcomes, metric), metric)
    return replace(best, chance=dev_chance(prepare_task(config, target)))


def _best_seed(outcomes: list[FusionOutcome], metric: str) -> FusionOutcome:
    """The outcome of the best seed on the dev `metric` (its caller's line says which)."""
    return max(outcomes, key=lambda o: signed(metric, o.dev_metrics.get(metric, float("nan"))))


def point_best(uri: str, outcome: FusionOutcome, metric: str) -> FusionOutcome:
    """Point `best` at the outcome's version, unless the version it is on scored better on the
    same dev metric (compared as both are tagged, to 4 decimals; a tie moves it): then it stays
    there and the outcome says so. A version on another base model, or trained and scored on
    other data files of the target (their `data_sha256` tags), is not compared: `best` serves
    the config's base and data, so it moves, and the outcome says from which."""
    name, number = outcome.version.name, outcome.version.version
    current = get_version(uri, name, alias=BEST_ALIAS)
    ours = outcome.dev_metrics.get(metric)
    apart = unranked_reason(uri, current, outcome.version, outcome.target) if current else None
    if current is not None and int(current.version) != int(number) and ours is not None:
        theirs = current.tags.get(f"dev_{metric}") if current.tags.get("metric") == metric else None
        mine = float(notes.tag_number(ours))
        better = theirs is not None and signed(metric, float(theirs)) > signed(metric, mine)
        if better and apart is None:
            return replace(outcome, best_kept=current)
    set_alias(uri, name, BEST_ALIAS, number)
    if BEST_ALIAS not in outcome.version.aliases:  # the summary shows the version as it is now
        aliases = (*outcome.version.aliases, BEST_ALIAS)
        outcome = replace(outcome, version=replace(outcome.version, aliases=aliases))
    moved = current is not None and int(current.version) != int(number)
    if not moved:
        return outcome
    return replace(outcome, best_was=str(current.version), best_was_apart=apart)


def _fusion_for_seed(
    config: PipelineConfig,
    target: str,
    uri: str,
    experiment_id: str,
    versions: dict[str, ModelVersionInfo],
    waited: float,
    since: float,
    say: Say,
) -> FusionOutcome:
    """The fusion over `versions` with `config`'s seed: found registered, or trained now (its
    version without an alias: the caller points `best`; `since`: `run_fusion_job`'s)."""
    key = lineage_key(config, target, versions)
    work = fusion_work(config, target, key)
    with training_claim(work, lambda: say(f"fusion {target}: another job trains it; waiting")):
        plan = plan_fusion(config, target, uri, versions)  # again: the other job may be done
        if plan.existing is not None:
            existing = plan.existing
            say(
                f"fusion {target}: already registered as v{existing.version} for these adapters "
                "and settings"
            )
            tags = existing.tags
            metrics = {k[4:]: float(v) for k, v in tags.items() if k.startswith("dev_")}
            return FusionOutcome(target, existing, metrics, False, waited, 0.0)
        if plan.purged is not None:
            was = f"v{plan.purged.version} is registered for these adapters and settings, but"
            say(f"fusion {target}: {was} {purged_text(plan.purged)}; training it again")
        return _train_and_register(
            config, plan, uri, experiment_id, work, waited, say, alias=None, since=since
        )


def _warm_up(config: PipelineConfig, target: str) -> None:
    """What a fusion job does before its first step that needs no adapter: the target's
    tokenised splits (into the shared cache) and one load of the base model (files into the
    page cache, the model classes imported)."""
    prepare_task(config, target)
    load_encoder(config.base)


@contextmanager
def training_claim(work: Path, on_wait: Callable[[], None]) -> Iterator[None]:
    """Hold the lock of a fusion's work folder (on the pipeline's shared storage) while it
    trains: a second job for the same lineage waits here, then finds it registered."""
    with exclusive_lock(work / FUSION_LOCK, on_wait):
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
    alias: str | None = BEST_ALIAS,
    tags: dict[str, str] | None = None,
    since: float | None = None,
) -> FusionOutcome:
    """Pull the plan's adapters, train (resuming from the newest checkpoint in `work`), log the
    weights heatmap and register the fusion under `alias` (None: no alias) with lineage tags
    and `tags`.
    `since`: the job waited for the adapters from then, so the delays since the last one's
    registration are logged when it came after (None: it did not wait, as `prune`)."""
    target = plan.target
    logger = open_plan_run(config, plan, uri, experiment_id)
    if tags:
        logger.set_tags(tags)
    workdir = JobWorkdir(work)
    try:
        dirs = _pull_adapters(config, plan, uri, work / "adapters")
        registered_at = max(v.created_ms for v in plan.versions.values()) / 1000.0
        start_delay = time.time() - registered_at
        gated = since is not None and registered_at >= since
        why = _unlike_best(uri, config, plan)
        if gated:
            after = f"{start_delay:.1f}s after the last adapter"
            say(f"fusion {target}: training over {plan.lineage} ({after}){why}")
            logger.log_metrics({"training_start_delay_s": start_delay})
        else:
            say(f"fusion {target}: training over {plan.lineage}{why}")
        fusion = FusionTraining(
            config, plan, dirs, work, logger, say, registered_at if gated else None
        )
        run = fusion.on_workers() if config.resources.distributed else fusion()
        log_best(logger, run.dev_metrics, run.fit.best_epoch)  # at its step, as a trial's
        logger.log_artifacts(workdir.run_dir, "")
        version = _register(config, plan, uri, logger.run_id, run, alias, tags)
    except BaseException as error:
        end_quietly(logger, ended_by(error))
        raise
    logger.end("FINISHED")
    workdir.clear_checkpoints()  # registered: a rerun finds the version, never resumes this
    delay = start_delay if gated else 0.0
    stopped = config.fusion.training.patience_note(run.fit.stop_reason, run.fit.epochs_run)
    return FusionOutcome(target, version, run.dev_metrics, True, waited, delay, stopped=stopped)


def _unlike_best(uri: str, config: PipelineConfig, plan: FusionPlan) -> str:
    """Why a fusion is trained where `best` holds one: it fused other adapter versions, or the
    same ones with other settings (nothing when there is none yet)."""
    best = get_version(uri, fusion_model_name(config.registry_prefix, plan.target), BEST_ALIAS)
    if best is None or plan.purged is not None and best.version == plan.purged.version:
        return ""  # none, or this fusion, whose run mlflow gc purged: said
    fused = best.tags.get(TAG_LINEAGE)
    if fused and fused != plan.lineage:
        return f"; v{best.version} (@best) fused {fused}"
    return f"; v{best.version} (@best) fused these with other settings"


def registered_text(outcome: FusionOutcome, metric: str, seeds: int = 1) -> str:
    """`registered demo.fusion.x v1 (accuracy 0.7867)`, or `kept ... (..., registered before)`
    for one found registered; of `seeds` > 1, `the best of 3 seeds is ...` (the seeds' own
    lines said each registration, and a third `registered` read as one more); said by whoever
    gets the outcome (the job's own lines may reach a pipeline's console later than its result)."""
    value = outcome.dev_metrics.get(metric)
    shown = f"{metric} {value:.4f}" if value is not None else metric
    done = "registered" if outcome.trained else "kept"  # found registered: nothing was done
    before = "" if outcome.trained else ", registered before"
    if seeds > 1:
        done, before = f"the best of {seeds} seeds is", ""
        shown = f"seed {outcome.version.tags.get(TAG_SEED)}, {shown}"
    text = f"{done} {outcome.version.name} v{outcome.version.version} ({shown}{before})"
    text += outcome.stopped
    kept = outcome.best_kept
    if kept is not None:
        theirs = kept.tags.get(f"dev_{metric}")
        text += f"; best stays on v{kept.version} ({metric} {float(theirs):.4f}), better on dev"
    elif outcome.best_was is not None and not outcome.trained:  # a config or files changed back
        apart = f", {outcome.best_was_apart}" if outcome.best_was_apart else ""
        text += f"; best is v{outcome.version.version} again (it was on v{outcome.best_was}{apart})"
    elif outcome.best_was_apart is not None:
        text += f"; best moves here from v{outcome.best_was}, {outcome.best_was_apart}"
    if outcome.chance is not None and value is not None:
        text += outcome.chance.note(metric, value)
    return text


def _pull_adapters(config: PipelineConfig, plan: FusionPlan, uri: str, folder: Path) -> list[Path]:
    """The plan's adapter versions, pulled into `folder/<task>` in the config's order."""
    return [
        pull(
            uri,
            adapter_model_name(config.registry_prefix, t),
            folder / t,
            version=plan.versions[t].version,
        )
        for t in config.fusion.targets[plan.target]
    ]


def _register(
    config: PipelineConfig,
    plan: FusionPlan,
    uri: str,
    run_id: str,
    run: RunResult,
    alias: str | None,
    tags: dict[str, str] | None,
) -> ModelVersionInfo:
    """Register the trained fusion (its head beside it) with its target task, lineage,
    settings and dev metrics as tags (the task tag as an adapter version has it, so one search
    by task finds both)."""
    sources = config.fusion.targets[plan.target]
    versions, metric = {t: plan.versions[t] for t in sources}, config.fusion.training.metric
    target_data = data_sha256(config, plan.target)  # None for a hub dataset: no tag
    data = {TAG_DATA_SHA256: target_data} if target_data is not None else {}
    return register_version(
        uri,
        fusion_model_name(config.registry_prefix, plan.target),
        run_id,
        "fusion",
        run.out_dir / "fusion" / FUSION_WEIGHTS,
        tags={
            TAG_TRIAL_ID: plan.trial_id,
            TAG_TASK: plan.target,
            TAG_LINEAGE: plan.lineage,
            TAG_LINEAGE_KEY: plan.key,
            "base_model": config.base_model,
            TAG_BASE_MODEL_DTYPE: config.base_model_dtype,
            TAG_BASE_MODEL_LAYOUT: layout_tag(config),
            **data,
            "metric": metric,
            "metric_direction": metric_direction(metric),
            TAG_SEED: config.fusion.training.seed,
            **{f"dev_{k}": notes.tag_number(v) for k, v in run.dev_metrics.items()},
            **{f"adapter.{t}": f"v{plan.versions[t].version}" for t in sources},
            **(tags or {}),
        },
        alias=alias,
        companions={"head": run.out_dir / "head" / HEAD_WEIGHTS},
        description=plan.pruned_note
        + notes.fusion_version_note(plan.target, versions, metric, run.dev_metrics),
        model_description=notes.fusion_model_note(plan.target),
    )
