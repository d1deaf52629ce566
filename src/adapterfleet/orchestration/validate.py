"""Check a whole pipeline before anything starts; each error is one line, before a GPU is held."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from adapterfleet._hub import hub_unreachable
from adapterfleet.adapters import MINILM, AdapterConfig, resolve_base_model
from adapterfleet.adapters.base_checks import (
    WEIGHT_FILES,
    check_checkpoint,
    refuse_encoder_decoder,
)
from adapterfleet.adapters.base_model import BASE_MODEL_TAKES, local_files_only, near_packaged
from adapterfleet.config import ConfigError, PipelineConfig
from adapterfleet.console import Say
from adapterfleet.data import TaskData, load_task
from adapterfleet.disk import low_space


def base_model_config(name: str) -> Any:
    """The base model's HF config (read from its folder or the hub, no weights loaded); a path
    that is not a folder here, a folder without weights, or a name that cannot be loaded is
    refused with what `base_model` takes; so are an encoder-decoder model and, in a local
    folder, a checkpoint that cannot be read or lacks weights of the model (`base_checks`)."""
    path = resolve_base_model(name)
    local = os.path.isdir(path)
    if local and not any(os.path.isfile(os.path.join(path, f)) for f in WEIGHT_FILES):
        raise ConfigError(
            f"base_model: {name} holds no weights ({', '.join(WEIGHT_FILES)}); save the model "
            "there with save_pretrained, or give another base_model"
        )
    model_config = _read_config(name, path, local)
    refuse_encoder_decoder(name, model_config)
    if local:
        check_checkpoint(name, Path(path), model_config)
    return model_config


def _read_config(name: str, path: str, local: bool) -> Any:
    from transformers import AutoConfig

    takes = BASE_MODEL_TAKES
    try:
        return AutoConfig.from_pretrained(path, local_files_only=local_files_only(path))
    except (OSError, ValueError) as error:
        first = str(error).splitlines()[0] if str(error) else type(error).__name__
        if not local and (why := hub_unreachable()):
            first = f"{why}, and it is not in the Hugging Face cache"
        near = near_packaged(name)
        fix = f"did you mean {MINILM}, the packaged encoder?" if near else f"give {takes}"
        if not local and not near:  # a folder's name mistyped (berrt, models/berrt) reads as an id
            fix = f"there is no folder {name} in {os.getcwd()} either; {fix} (a hub id loads "
            fix += "from the network or the Hugging Face cache, HF_HOME)"
        raise ConfigError(f"base_model: cannot load {name!r} ({first}); {fix}") from None


def check_reduction_factors(config: PipelineConfig, hidden_size: int) -> None:
    stage = config.adapters
    fields = {"adapters.reduction_factors": stage.reduction_factors}
    for task, points in stage.task_grid.items():
        fields[f"adapters.task_grid.{task}.reduction_factors"] = points.reduction_factors
    if set(config.baselines.systems) - {"head", "full"}:  # a baseline that trains adapters
        fields["baselines.reduction_factor"] = (config.baselines.reduction_factor,)
    for where, factors in fields.items():
        for rf in factors:
            try:
                AdapterConfig(stage.architecture, rf).bottleneck_size(hidden_size)
            except ValueError as error:
                raise ConfigError(f"{where}: {error}") from None


def check_resources(
    config: PipelineConfig, nodes: list[Mapping[str, float]], say: Say | None = None
) -> None:
    """Refuse per-trial resources that no single node can provide, and a trial of `workers`
    that the nodes together cannot place (each worker on one node). `say`: on a cluster joined
    rather than started here, where nodes still join (an autoscaler adds them when trials ask,
    as cluster.yaml's does for a head of no CPUs), that is said in a warning instead: refused,
    the job ended before a trial asked, so none was ever added."""
    problem, fix = _unplaceable(config, nodes)
    if not problem:
        return
    if say is None:
        raise ConfigError(f"{problem}; {fix}")
    say(
        f"warning: {problem} now; the trials wait for nodes that can (an autoscaler adds them "
        f"as trials ask); without one, stop this run and {fix}"
    )


def _unplaceable(config: PipelineConfig, nodes: list[Mapping[str, float]]) -> tuple[str, str]:
    """What of a trial the nodes cannot place, and the fix; ("", "") when they can."""
    resources = config.resources
    have = ", ".join(f"{{CPU: {n.get('CPU', 0):g}, GPU: {n.get('GPU', 0):g}}}" for n in nodes)
    fits = [resources.fitting(node) for node in nodes]
    if not any(fits):
        one = "a worker" if resources.distributed else "a trial"
        return (
            f"resources: {one} needs cpu={resources.cpu:g}, gpu={resources.gpu:g} "
            f"but no node can provide that (nodes: {have or 'none'})",
            "lower resources or add nodes",
        )
    if sum(fits) < resources.workers:
        return (
            f"resources.workers: {resources.workers} workers of cpu={resources.cpu:g}, "
            f"gpu={resources.gpu:g} each, but the nodes can place only {sum(fits)} at once "
            f"(nodes: {have})",
            "lower workers or the cpu / gpu per worker, or add nodes",
        )
    return "", ""


def used_tasks(config: PipelineConfig) -> list[str]:
    """Every task the pipeline trains on: adapters, fusion targets and the baselines' tasks."""
    names = [*config.adapter_tasks, *config.fusion.targets]
    if config.baselines.systems:
        names += config.baselines.tasks
    return list(dict.fromkeys(names))


def validate_pipeline(
    config: PipelineConfig,
    *,
    check_tracking: Callable[[str], None] | None = None,
    tracking_uri: str | None = None,
    nodes: list[Mapping[str, float]] | None = None,
) -> dict[str, TaskData]:
    """Check the base model (family, reduction factors, max_length, tokenizer, devices), the
    tracking store and the resources, then load every task (files, columns, labels, empty
    splits). Returns the loaded tasks. The tasks come last: a demo config's first load writes
    its generated data, which a refusal of anything else must not leave behind."""
    validate_settings(config)
    if check_tracking is not None and tracking_uri is not None:
        check_tracking(tracking_uri)
    if nodes is not None:
        check_resources(config, nodes)
    return {task: load_task(config.tasks[task]) for task in used_tasks(config)}


def warn_single_adapter_fusions(config: PipelineConfig) -> None:
    """Said, not refused (a fusion of one adapter is a cheap smoke test): over one adapter the
    fusion's softmax weight is always 1, so it mixes nothing and is not AdapterFusion."""
    for target, sources in config.fusion.targets.items():
        if len(sources) == 1:
            logging.getLogger(__name__).warning(
                "fusion.targets.%s fuses one adapter (%s): its fusion weight is always 1, so the "
                "fusion learns no mix, only its value projection and head; list two or more "
                "adapter tasks (AdapterFusion composes several)",
                target,
                sources[0],
            )


def validate_settings(config: PipelineConfig) -> None:
    """What a config asks of this machine's files and its base model, without its data, store
    or Ray: the storage folder, the base model (family, layout, tokenizer), the reduction
    factors, max_length and the devices asked for."""
    check_storage(config)
    model_config = base_model_config(config.base_model)
    check_base_layout(config, model_config)
    check_pooling(config, model_config, used_tasks(config))
    check_reduction_factors(config, int(model_config.hidden_size))
    check_model_limits(config, model_config)
    warn_single_adapter_fusions(config)


def check_storage(config: PipelineConfig) -> None:
    """The storage folder (checkpoints, data cache, locks; the SQLite store by default) is one,
    or can be made, on a disk with room for a run (`disk.low_space`): found here, not after
    Ray has started."""
    from adapterfleet.registry.store import folder_problem

    problem = folder_problem(Path(config.storage))
    if problem:
        raise ConfigError(
            f"storage: cannot use {config.storage} ({problem}); choose a writable folder "
            "(-o storage=<folder>)"
        )
    problem = low_space(Path(config.storage))
    if problem:
        raise ConfigError(f"storage: {problem}")


def check_model_limits(config: PipelineConfig, model_config: Any) -> None:
    """The base model's limits (`limits.py`): max_length, its tokenizer, the devices asked for."""
    from adapterfleet.orchestration.limits import check_devices, check_max_length, check_tokenizer

    check_max_length(config, model_config)
    check_tokenizer(config, model_config)
    check_devices(config, local=False)


def check_pooling(config: PipelineConfig, model_config: Any, tasks: Iterable[str]) -> None:
    """No task pools the first token of a decoder (`first_token_on_decoder` says why; the
    library's `add_head` refuses it too), so no head trains to the majority class unseen."""
    from adapterfleet.adapters.architectures import causal_type, first_token_on_decoder

    declared = dict(config.base.layout) if config.base and config.base.layout else {}
    model_type = getattr(model_config, "model_type", None)
    decoder = causal_type(model_type) or declared.get("pooling") == "last"
    if decoder and declared.get("pooling") == "cls":
        raise ConfigError(first_token_on_decoder("base_model_layout.", model_type))
    for task in tasks:
        if decoder and config.tasks[task].pooling == "cls":
            raise ConfigError(first_token_on_decoder(f"task {task!r}, ", model_type))


def check_base_layout(config: PipelineConfig, model_config: Any) -> None:
    """The base model's family has a layout (built in, or declared under `base_model_layout`)
    whose every path exists in the model; checked on a skeleton that holds no weights."""
    from adapterfleet.adapters.architectures import (
        SLOT_MAPS,
        SlotMap,
        layout_problem,
        skeleton,
        unsupported_message,
    )

    model_type = getattr(model_config, "model_type", None)
    declared = config.base.layout if config.base else ()
    if not declared and model_type not in SLOT_MAPS:
        raise ConfigError(f"base_model: {unsupported_message(model_type)}")
    slots = (
        SlotMap.from_mapping(dict(declared), model_type) if declared else SLOT_MAPS[str(model_type)]
    )
    try:
        model = skeleton(model_config)
    except (ValueError, TypeError, OSError) as error:
        first = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise ConfigError(f"base_model: cannot build {model_type!r} ({first})") from None
    problem = layout_problem(model, slots)
    if problem is not None:
        field, text = problem
        where = "base_model_layout" if declared else f"the built-in {model_type} layout"
        fix = "fix the path" if declared else "declare base_model_layout for this model"
        raise ConfigError(f"{where}.{field}: {text}; {fix}")
