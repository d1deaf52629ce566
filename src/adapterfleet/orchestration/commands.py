"""The single commands that take more than one step below the CLI: `fuse --wait`, `prune`,
`tasks`. Each is the one function its command calls; the CLI only parses and prints."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from adapterfleet.config import ConfigError, PipelineConfig, training_with
from adapterfleet.console import Say
from adapterfleet.data import TaskData, TaskSpec, load_task
from adapterfleet.data.baseline import dev_mean, majority
from adapterfleet.orchestration.fusion_job import FusionOutcome, registered_text, run_fusion_job
from adapterfleet.orchestration.fusion_plan import seed_configs
from adapterfleet.orchestration.limits import check_single_run
from adapterfleet.orchestration.prune import PruneReport, prune_fusion
from adapterfleet.orchestration.validate import validate_settings
from adapterfleet.registry import ensure_experiment
from adapterfleet.registry.heartbeat import heartbeat
from adapterfleet.training import TrainConfig


def fusion_training(config: PipelineConfig, target: str, **changes: Any) -> TrainConfig:
    """`fusion.training` of `target` (with its metric) and the given changes (None values are
    ignored, as for CLI options left out; a value out of range is refused naming the option)."""
    return training_with(config.fusion.training_for(target), **changes)


def with_fusion_training(config: PipelineConfig, training: TrainConfig, **stage: Any) -> Any:
    """`config` whose fusion stage trains with `training` (and the given stage changes)."""
    return replace(config, fusion=replace(config.fusion, training=training, **stage))


def fuse_registered(
    config: PipelineConfig,
    target: str,
    *,
    timeout_s: float,
    say: Say,
    config_path: object = "the config",
    **changes: Any,
) -> FusionOutcome:
    """`fuse --wait`: the fusion of a configured target over its registered `best` adapters,
    waiting for them, then registered. `changes`: learning_rate, max_epochs, seed, progress;
    a seed given trains that seed alone."""
    if target not in config.fusion.targets:
        raise ConfigError(
            f"fusion.targets: {target!r} is not a fusion target of {config_path}; add it (-o "
            f"'fusion.targets.{target}=all'), or fuse saved adapter folders with --adapters"
        )
    check_single_run(config, target, option="--target")  # before the experiment is created
    seed = changes.get("seed")
    seeds = config.fusion.seeds if seed is None else (seed,)
    config = with_fusion_training(config, fusion_training(config, target, **changes), seeds=seeds)
    uri = config.tracking_uri
    experiment_id = ensure_experiment(uri, config.name, say=say)
    with heartbeat(uri, experiment_id, say):
        outcome = run_fusion_job(config, target, uri, experiment_id, timeout_s=timeout_s, say=say)
    seeds = len(seed_configs(config))
    say(f"fusion {target}: {registered_text(outcome, config.fusion.training.metric, seeds)}")
    return outcome


def prune_registered(
    config: PipelineConfig, target: str, *, progress: bool, say: Say, **options: Any
) -> PruneReport:
    """`prune`: rank the adapters of `target`'s registered fusion and train the smaller ones
    (`options`: keep, threshold, alias, version)."""
    check_single_run(config, target, option="prune TARGET")  # before the experiment exists
    config = with_fusion_training(config, fusion_training(config, target, progress=progress))
    uri = config.tracking_uri
    experiment_id = ensure_experiment(uri, config.name, say=say)
    with heartbeat(uri, experiment_id, say):
        return prune_fusion(config, target, uri, experiment_id, say=say, **options)


def task_summaries(config: PipelineConfig) -> list[dict[str, Any]]:
    """Every task of the config loaded (files, columns, labels checked): its type, splits,
    labels and the metric its adapter is selected on; first, what `run` checks of the base
    model and the settings before Ray starts (`validate_settings`)."""
    validate_settings(config)
    rows = []
    for name, spec in config.tasks.items():
        data = load_task(spec)
        rows.append(
            {
                "task": name,
                "type": spec.kind,
                "text columns": _text_columns(spec),
                "train": len(data.train),
                "dev": len(data.dev),
                "labels": ", ".join(data.label_names) or _numbers(spec.value_range),
                "metric": config.adapters.training_for(name).metric,
                "dev chance level": _chance(data),
                "skipped rows": data.skipped,
            }
        )
    return rows


def _chance(data: TaskData) -> str:
    """What a model that learned nothing scores on the dev split: `neg (95%)`, its most common
    label and that label's share (the accuracy of always giving it), or for regression `mean 2.71
    (MSE 2.49)` (the MSE of always answering the mean)."""
    labels = data.dev["label"]
    found = dev_mean(labels) if data.is_regression else majority(labels, data.label_names)
    return str(found) if found is not None else ""


def _text_columns(spec: TaskSpec) -> str:
    """The columns a task's rows (and a `predict` input) hold its texts in."""
    if not spec.is_multiple_choice:
        return ", ".join(spec.text_fields)
    layout = spec.choice_layout
    choices = layout.list_column or ", ".join(layout.fields)
    return ", ".join([*layout.context, choices])


def _numbers(value_range: tuple[float, float] | None) -> str:
    """The labels of a regression task, as `adapterfleet tasks` lists them."""
    return "numbers" + (f" in [{value_range[0]:g}, {value_range[1]:g}]" if value_range else "")
