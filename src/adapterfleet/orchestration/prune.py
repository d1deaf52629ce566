"""`adapterfleet prune TARGET`: drop the adapters a trained fusion hardly uses (the paper's 8.2).

The registered fusion of TARGET is pulled, its adapters are ranked by their mean fusion weight on
the target's dev set (over layers and real tokens), and for each size k the fusion over the top k
is trained like a pipeline fusion (checkpointed, resumable, its own MLflow run and heatmap) and
registered as a version of the same model under the alias `pruned-<k>`, tagged with the adapters
it kept and the version it was pruned from; `best` is left where it is. Every pruned version
(and the source) is then pulled back and timed on the same dev batches in this process, so the
speed-up is a ratio measured in one run. The table (Markdown and JSON) and a plot of accuracy and
speed against the number of adapters kept go to a folder and to an MLflow run of kind `prune`.
"""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from adapterfleet._locks import LockHeld, sole_lock
from adapterfleet.config import ConfigError, PipelineConfig
from adapterfleet.console import Say
from adapterfleet.orchestration.fusion_plan import (
    PRUNE_DIR,
    PRUNE_LOCK,
    FusionPlan,
    fusion_work,
    lineage_key,
)
from adapterfleet.orchestration.predict import (
    check_target,
    find_version,
    fusion_lineage,
    load_model,
    pull_version,
)
from adapterfleet.registry import (
    MlflowRunLogger,
    ModelVersionInfo,
    adapter_model_name,
    fusion_model_name,
    get_version,
    open_prune_run,
    set_alias,
)
from adapterfleet.registry.purged import purged_text, registered_by_tag
from adapterfleet.registry.tags import TAG_LINEAGE_KEY, TAG_PRUNED_FROM
from adapterfleet.results.prune_report import SPEED_EXAMPLES, PrunePoint, PruneReport, write_report

TAG_KEPT = "adapterfleet.kept"


def rank_adapters(weights: Any, tasks: Sequence[str]) -> list[tuple[str, float]]:
    """(task, mean weight over layers) from a (layers, adapters) weight tensor, largest first;
    ties keep the given order."""
    means = [float(x) for x in weights.float().mean(0)]
    if len(means) != len(tasks):
        raise ValueError(f"{len(means)} weight columns for {len(tasks)} adapters")
    order = sorted(range(len(tasks)), key=lambda i: -means[i])
    return [(tasks[i], means[i]) for i in order]


def sizes_to_keep(
    ranking: Sequence[tuple[str, float]],
    keep: Sequence[int] | None = None,
    threshold: float | None = None,
) -> list[int]:
    """How many adapters each pruned fusion keeps, largest first. `keep`: those sizes; `threshold`:
    as many as have a mean weight of at least it; neither: halving, ⌈n/2⌉, ⌈n/4⌉, … 1."""
    n = len(ranking)
    check_prune_options(n, keep, threshold)
    if threshold is not None:
        k = sum(weight >= threshold for _, weight in ranking)
        if k == 0:
            raise ConfigError(
                f"prune --threshold: no adapter has a mean weight of {threshold} or more "
                f"(the largest is {ranking[0][1]:.3f}); lower it"
            )
        if k == n:
            raise ConfigError(
                f"prune --threshold: every adapter has a mean weight of {threshold} or more "
                f"(the smallest is {ranking[-1][1]:.3f}); raise it to drop some"
            )
        return [k]
    if keep:
        return sorted(set(keep), reverse=True)
    sizes = {math.ceil(n / 2**i) for i in range(1, n.bit_length() + 1)}
    return sorted((k for k in sizes if 1 <= k < n), reverse=True)


def check_prune_options(
    n: int, keep: Sequence[int] | None = None, threshold: float | None = None
) -> None:
    """What can be refused of `--keep` / `--threshold` knowing only the fusion's `n` adapters:
    before its dev set is read and ranked."""
    if n < 2:
        raise ConfigError(f"prune: the fusion has {n} adapter; there is nothing to prune")
    if keep and threshold is not None:
        raise ConfigError("prune: give --keep or --threshold, not both")
    if threshold is not None and not 0.0 < threshold < 1.0:
        raise ConfigError(f"prune --threshold: {threshold} is not between 0 and 1")
    bad = [k for k in keep or () if not 1 <= k < n]
    if bad:
        k = bad[0]
        said = f"{k} keeps no adapter; keep at least 1" if k < 1 else f"{k} would drop none"
        said = said if k < 1 else f"{said}; keep at most {n - 1}"
        raise ConfigError(
            f"prune --keep: {said} (the fusion has {n} adapters, and pruning drops at least one)"
        )


def inference_speeds(
    models: Sequence[Any], batches: Sequence[dict[str, Any]], rounds: int = 3
) -> list[float]:
    """Examples per second of each model over `batches`: one warm-up batch each, then `rounds`
    rounds that time every model in turn (so a busy moment of the machine hits them alike);
    each model's best pass counts."""
    import torch

    examples = sum(int(b["input_ids"].shape[0]) for b in batches)
    best = [math.inf] * len(models)
    with torch.inference_mode():
        for model in models:
            model.eval()
            model(batches[0])
        for _ in range(rounds):
            for index, model in enumerate(models):
                start = time.perf_counter()
                for batch in batches:
                    model(batch)
                best[index] = min(best[index], time.perf_counter() - start)
    return [examples / seconds for seconds in best]


def prune_fusion(
    config: PipelineConfig,
    target: str,
    uri: str,
    experiment_id: str,
    *,
    keep: Sequence[int] | None = None,
    threshold: float | None = None,
    alias: str = "best",
    version: int | None = None,
    say: Say = print,
) -> PruneReport:
    """Rank the adapters of `target`'s registered fusion, train and register the pruned fusions,
    time them all, and write the report (see the module's docstring)."""
    check_target(config, target)
    config = replace(config, fusion=config.fusion.for_target(target))  # the target's metric
    targets = ", ".join(config.fusion.targets) or "none in this config"
    fix = f"prune works on a registered fusion (fusion targets: {targets}); check --alias/--version"
    source = find_version(config, target, uri, alias=alias, version=version, fix=fix)
    check_prune_options(len(fusion_lineage(source)), keep, threshold)
    folder = Path(config.storage).resolve() / PRUNE_DIR / target / f"v{source.version}"
    job = _PruneJob(config, target, uri, experiment_id, folder, say)
    with _prune_lock(job):
        return _prune(job, source, keep, threshold)


def _prune(
    job: _PruneJob, source: ModelVersionInfo, keep: Sequence[int] | None, threshold: float | None
) -> PruneReport:
    from adapterfleet.orchestration.local import prepare_task  # loads torch
    from adapterfleet.training.modes import metric_names, task_batches

    config, target, uri, folder, say = job.config, job.target, job.uri, job.folder, job.say
    tokenized = prepare_task(config, target)
    _, dev = task_batches(tokenized, config.fusion.training)
    dev_batches = list(dev)
    metrics = metric_names(config.tasks[target].metrics, config.fusion.training)

    say(
        f"prune {target}: ranking the adapters of v{source.version} on "
        f"{len(tokenized.dev)} dev rows"
    )
    order, ranking = _rank_source(job, source, dev_batches)
    sizes = sizes_to_keep(ranking, keep, threshold)
    say("prune " + target + ": " + ", ".join(f"{t} {w:.3f}" for t, w in ranking))

    versions = _adapter_versions(config, uri, source)
    summary = open_prune_run(
        uri,
        job.experiment_id,
        target,
        f"v{source.version}",
        tags={"adapterfleet.prune_sizes": ",".join(map(str, sizes))},
    )
    try:
        fusions = _fusions(job, source, order, [t for t, _ in ranking], sizes, versions)
        points = _measure(job, fusions, order, dev_batches, metrics, summary)
        report = PruneReport(
            target, source.version, metrics[0], tuple(ranking), tuple(points), folder
        )
        write_report(report)
        summary.log_artifacts(folder / "report", "prune")
    except BaseException as error:
        summary.end("KILLED" if isinstance(error, KeyboardInterrupt) else "FAILED")
        raise
    summary.end("FINISHED")
    return report


# -- steps ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _PruneJob:
    """What every step of `prune_fusion` works with."""

    config: PipelineConfig
    target: str
    uri: str
    experiment_id: str
    folder: Path  # <storage>/prune/<target>/v<source version>
    say: Say


@contextlib.contextmanager
def _prune_lock(job: _PruneJob) -> Iterator[None]:
    """One prune of a target at a time per storage: two replaced each other's pulled copies
    under `prune/<target>/`, and the one that lost said the registry's files were gone."""
    lock = job.folder.parent / PRUNE_LOCK
    try:
        with sole_lock(lock, f"{os.getpid()}"):
            yield
    except LockHeld as other:
        raise ConfigError(
            f"prune {job.target}: another adapterfleet prune of {job.target} is running on this "
            f"storage (pid {other.note or '?'}); wait for it to end, then run this one again "
            "(what it trains is kept)"
        ) from None


_Fusion = tuple[ModelVersionInfo, str, bool]  # the version, its alias in the report, trained now


def _rank_source(
    job: _PruneJob, source: ModelVersionInfo, dev_batches: Sequence[dict[str, Any]]
) -> tuple[list[str], list[tuple[str, float]]]:
    """The source fusion's adapter tasks in its own order, and their ranking by mean weight."""
    from adapterfleet.fusion import mean_fusion_weights  # loads torch
    from adapterfleet.fusion.analysis import fused_adapter_names

    model, tasks = _pulled_model(job.config, job.uri, source, job.folder / f"v{source.version}")
    weights = mean_fusion_weights(model, job.target, dev_batches)
    names = fused_adapter_names(model, job.target)
    order = [tasks[name] for name in names]  # the source fusion's own order of its adapters
    return order, rank_adapters(weights, order)


def _fusions(
    job: _PruneJob,
    source: ModelVersionInfo,
    order: Sequence[str],
    ranked: Sequence[str],
    sizes: Sequence[int],
    versions: dict[str, ModelVersionInfo],
) -> list[_Fusion]:
    """The source, then for each size k the fusion over the top k of `ranked` (in `order`), and
    those an earlier prune of the source registered (a report left them out)."""
    fusions = [(source, ",".join(source.aliases) or "source", False)]
    for k in sizes:
        top = set(ranked[:k])
        kept = [t for t in order if t in top]
        info, trained = _pruned_fusion(
            job.config, job.target, job.uri, job.experiment_id, kept, versions, source, job.say
        )
        fusions.append((info, f"pruned-{k}", trained))
    name = fusion_model_name(job.config.registry_prefix, job.target)
    for k in set(range(1, len(order))) - set(sizes):
        earlier = get_version(job.uri, name, alias=f"pruned-{k}")
        if earlier is not None and earlier.tags.get(TAG_PRUNED_FROM) == f"v{source.version}":
            fusions.append((earlier, f"pruned-{k}", False))
    return [fusions[0], *sorted(fusions[1:], key=lambda f: -len(f[0].fused))]


def _measure(
    job: _PruneJob,
    fusions: Sequence[_Fusion],
    order: Sequence[str],
    dev_batches: Sequence[dict[str, Any]],
    metrics: Sequence[str],
    summary: MlflowRunLogger,
) -> list[PrunePoint]:
    """Every fusion pulled back, timed and evaluated on the dev set; one point each, logged."""
    from adapterfleet.training import evaluate  # loads torch

    job.say(f"prune {job.target}: evaluating and timing {len(fusions)} fusions")
    folder = job.folder
    models = [
        _pulled_model(job.config, job.uri, i, folder / f"v{i.version}")[0] for i, _, _ in fusions
    ]
    speeds = inference_speeds(models, _first_examples(dev_batches, SPEED_EXAMPLES))
    points = []
    for (info, alias, trained), model, speed in zip(fusions, models, speeds, strict=True):
        kept = tuple(t for t in order if f"adapter.{t}" in info.tags)
        point = PrunePoint(
            kept, info.version, alias, evaluate(model, dev_batches, metrics), speed, trained
        )
        points.append(point)
        summary.log_metrics(
            {
                **{f"dev_{m}": v for m, v in point.dev_metrics.items()},
                "examples_per_second": point.examples_per_second,
            },
            step=len(kept),
        )
    return points


def _first_examples(batches: Sequence[dict[str, Any]], count: int) -> list[dict[str, Any]]:
    out, seen = [], 0
    for batch in batches:
        if seen >= count:
            break
        out.append(batch)
        seen += int(batch["input_ids"].shape[0])
    return out


def _pulled_model(
    config: PipelineConfig, uri: str, info: ModelVersionInfo, dest: Path
) -> tuple[Any, dict[str, str]]:
    """The fusion `info` pulled into `dest` (sha256-verified) and loaded, and its adapters'
    names -> their tasks (the folders `pull_version` writes them to)."""
    from adapterfleet.adapters import read_adapter_config  # loads torch

    shutil.rmtree(dest, ignore_errors=True)
    pull_version(config, uri, info, dest)
    tasks = {read_adapter_config(d)[0]: d.name for d in (dest / "adapters").iterdir()}
    return load_model(config.base, info.task or "", dest), tasks


def _adapter_versions(
    config: PipelineConfig, uri: str, source: ModelVersionInfo
) -> dict[str, ModelVersionInfo]:
    out = {}
    for task, number in fusion_lineage(source).items():
        info = get_version(uri, adapter_model_name(config.registry_prefix, task), version=number)
        if info is None:
            raise ConfigError(
                f"prune: adapter {task} v{number} named by the fusion v{source.version} is no "
                "longer registered"
            )
        out[task] = info
    return out


def _pruned_fusion(
    config: PipelineConfig,
    target: str,
    uri: str,
    experiment_id: str,
    kept: list[str],
    versions: dict[str, ModelVersionInfo],
    source: ModelVersionInfo,
    say: Say,
) -> tuple[ModelVersionInfo, bool]:
    """The registered fusion over `kept` (trained now unless one with the same lineage is
    registered), with the alias `pruned-<k>`; and whether it was trained now."""
    from adapterfleet.orchestration.fusion_job import (  # loads torch
        _train_and_register,
        training_claim,
    )

    pruned = replace(config, fusion=replace(config.fusion, targets={target: kept}))
    chosen = {t: versions[t] for t in kept}
    key = lineage_key(pruned, target, chosen)
    name = fusion_model_name(config.registry_prefix, target)
    alias = f"pruned-{len(kept)}"
    work = fusion_work(config, target, key)
    with training_claim(work, lambda: say(f"prune {target}: another job trains it; waiting")):
        existing, purged = registered_by_tag(uri, name, TAG_LINEAGE_KEY, key)
        if existing is not None:
            say(f"prune {target}: {', '.join(kept)} registered before as v{existing.version}")
            set_alias(uri, name, alias, existing.version)
            return existing, False
        if purged is not None:  # nothing of it to pull: trained and registered anew
            was = f"{', '.join(kept)} registered before as v{purged.version}, but"
            say(f"prune {target}: {was} {purged_text(purged)}; training it again")
        lineage = ",".join(f"{t}:v{chosen[t].version}" for t in kept)
        plan = FusionPlan(target, chosen, key, lineage, None, purged, f"v{source.version}")
        tags = {TAG_PRUNED_FROM: f"v{source.version}", TAG_KEPT: ",".join(kept)}
        outcome = _train_and_register(
            pruned, plan, uri, experiment_id, work, 0.0, say, alias=alias, tags=tags
        )
    metric = pruned.fusion.training.metric
    value = outcome.dev_metrics.get(metric)
    shown = f", {metric} {value:.4f}" if value is not None else ""
    say(f"prune {target}: registered {name} v{outcome.version.version} (@{alias}{shown})")
    return outcome.version, True
