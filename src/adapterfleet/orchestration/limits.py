"""The checks that need more than the config file: the base model's limits, the machine's
devices and CPUs, and the arguments of the single-run commands. Each raises one `ConfigError`
line naming the field (or option) and the fix, before anything is written or started.

The config's own ranges and cross-field rules are checked when it is loaded (`config/`);
`validate.validate_pipeline` calls these for `run`, `check_single_run` serves `train`, `fuse`
and `evaluate`.
"""

from __future__ import annotations

import contextlib
import json
import os
import warnings
from pathlib import Path
from typing import Any

from adapterfleet.adapters import (
    ADAPTER_CONFIG,
    HEAD_CONFIG,
    AdapterConfig,
    load_tokenizer,
    resolve_base_model,
)
from adapterfleet.config import ConfigError, PipelineConfig
from adapterfleet.data import TokenizedTask
from adapterfleet.data.cache import tokens_sha256
from adapterfleet.fusion import FUSION_CONFIG
from adapterfleet.training import TrainConfig
from adapterfleet.training.modes import ADAPTER_MODES, RUN_FILE
from adapterfleet.tuning.spec import BUILT_IN_LAYOUT, declared_layout

# Families whose position ids start after the padding index (RoBERTa's `padding_idx + 1`):
# `max_position_embeddings` counts those, so a sequence has that many fewer positions.
_OFFSET_POSITIONS = {
    "roberta",
    "xlm-roberta",
    "xlm-roberta-xl",
    "camembert",
    "roberta-prelayernorm",
    "data2vec-text",
    "longformer",
    "mpnet",
}
SINGLE_RUN_MODES = ("head", "full", "st-a", "st-a-houlsby", "mt-a")
# where a tokenizer's vocabulary is read from: tokenizers' file, sentencepiece (Llama, T5,
# ALBERT), WordPiece (BERT), byte-level BPE (GPT-2, RoBERTa), tiktoken
_VOCABULARY_FILES = ("tokenizer.json", "*.model", "vocab.txt", "vocab.json", "*.tiktoken")
VOCABULARY_FIX = (
    "put the tokenizer files (tokenizer.json, or tokenizer.model, or vocab.txt / vocab.json + "
    "merges.txt) in the folder"
)


def position_limit(model_config: Any) -> int | None:
    """The longest sequence the base model can embed, None when it has no absolute limit."""
    if getattr(model_config, "position_biased_input", True) is False:
        return None  # DeBERTa-v2/v3: relative positions only
    positions = getattr(model_config, "max_position_embeddings", None)
    if not isinstance(positions, int) or positions <= 0:
        return None
    if getattr(model_config, "model_type", "") in _OFFSET_POSITIONS:
        positions -= int(getattr(model_config, "pad_token_id", 1) or 0) + 1
    return positions


def check_max_length(config: PipelineConfig, model_config: Any) -> None:
    limit = position_limit(model_config)
    if limit is not None and config.max_length > limit:
        raise ConfigError(
            f"max_length: {config.max_length} is more than the {limit} positions base_model "
            f"{config.base_model!r} can embed; use max_length <= {limit}"
        )


def check_tokenizer(config: PipelineConfig, model_config: Any) -> Any:
    """The base model's tokenizer, refused when it cannot be loaded or has (almost) no
    vocabulary: transformers builds a tokenizer of special tokens only from a folder that
    lacks vocab.txt / tokenizer.json (BERT, GPT-2, RoBERTa), and every word becomes [UNK]; a
    Llama-like folder without tokenizer.json / tokenizer.model fails to load instead."""
    try:
        tokenizer = load_tokenizer(config.base_model)
    except (OSError, ValueError, TypeError) as error:
        first = str(error).splitlines()[0] if str(error) else type(error).__name__
        problem = f"base_model: cannot load the tokenizer of {config.base_model!r}"
        if _lacks_vocabulary(config.base_model):
            raise ConfigError(
                f"{problem}: its vocabulary is missing (the folder has no tokenizer.json, "
                f"tokenizer.model, vocab.txt or vocab.json); {VOCABULARY_FIX}"
            ) from None
        raise ConfigError(f"{problem} ({first})") from None
    size, embedded = len(tokenizer), getattr(model_config, "vocab_size", None)
    special = len(set(getattr(tokenizer, "all_special_ids", ()) or ()))
    if size <= special + 1 or (isinstance(embedded, int) and size < embedded // 2):
        raise ConfigError(
            f"base_model: the tokenizer of {config.base_model!r} has {size} tokens "
            f"(the model embeds {embedded}): its vocabulary is missing; {VOCABULARY_FIX}"
        )
    check_token_ids(config.base_model, tokenizer, embedded)
    return tokenizer


def _lacks_vocabulary(name: str) -> bool:
    """A local folder holding none of the files a tokenizer's vocabulary is read from."""
    try:
        folder = Path(resolve_base_model(name))
    except ValueError:  # no folder at all: the load's own error says so
        return False
    return folder.is_dir() and not any(any(folder.glob(p)) for p in _VOCABULARY_FILES)


def check_token_ids(name: str, tokenizer: Any, rows: object) -> None:
    """Every id the tokenizer can produce has a row in the model's input embedding (its
    `vocab_size`): a larger one fails in the first step (an IndexError in the embedding)."""
    largest = max(tokenizer.get_vocab().values(), default=-1)  # added tokens included
    if isinstance(rows, int) and not isinstance(rows, bool) and largest >= rows:
        raise ConfigError(
            f"base_model: the tokenizer of {name!r} produces ids up to {largest}, but the "
            f"model's input embedding has {rows} rows (ids 0 to {rows - 1}); use the tokenizer "
            "saved with this model, or resize the embedding to the tokenizer "
            "(model.resize_token_embeddings(len(tokenizer)), then save_pretrained)"
        )


def other_base_error(what: str, recorded: str, ours: str) -> ConfigError:
    """`what` (a run folder, a registered version) was trained on base_model `recorded`, another
    than the config's `ours`: its adapters would be scored on tokens and weights they never saw."""
    return ConfigError(
        f"{what} was trained on base_model {recorded!r}, the config's is {ours!r}; use the base "
        f"it was trained on: -o base_model={recorded}"
    )


def check_layout(what: str, recorded: Any, config: PipelineConfig) -> None:
    """`what` (a run folder, a registered version) was trained with the base_model_layout
    `recorded` (run.json's mapping, a version's tag: JSON or "built-in"; None from before they
    were recorded): another than the config's is refused, as its adapters sit in the modules
    and on the side of the norm that layout named."""
    if recorded == BUILT_IN_LAYOUT:
        recorded = {}
    with contextlib.suppress(TypeError, ValueError):
        recorded = json.loads(recorded) if isinstance(recorded, str) else recorded
    if not isinstance(recorded, dict):
        return
    ours = declared_layout(config).get("base_model_layout", {})
    if recorded == ours:
        return
    changes = ", ".join(
        f"base_model_layout.{key}: {recorded.get(key, 'none')} → {ours.get(key, 'none')}"
        for key in sorted(set(recorded) | set(ours))
        if recorded.get(key) != ours.get(key)
    )
    kept = "declare the layout it was trained with" if recorded else "declare none"
    raise ConfigError(
        f"{what} was trained with another base_model_layout than the config's ({changes}); "
        f"its adapters sit where that layout placed them: {kept}"
    )


def check_run_folder(run_dir: Path) -> None:
    """`--run` is a folder that train, fuse or pull wrote: its run.json, or a head/ (heads/:
    MT-A); or one import-adapter wrote with a head, its head_config.json beside the adapter."""
    if not run_dir.is_dir():
        problem = "is a file" if run_dir.exists() else "does not exist"
    elif not any((run_dir / name).exists() for name in (RUN_FILE, "head", "heads", HEAD_CONFIG)):
        problem = f"has no {RUN_FILE}, head/, heads/ or {HEAD_CONFIG}: it is not a run folder"
    else:
        return
    raise ConfigError(
        f"--run {run_dir} {problem}; give the --out folder of a train or fuse run, a folder "
        "adapterfleet pull wrote, or one import-adapter wrote with its head (an adapter folder "
        "alone is used with fuse --adapters)"
    )


def note_other_dev(run_dir: Path, info: dict[str, Any], tokenized: TokenizedTask) -> None:
    """A warning where the dev rows evaluate scores differ from those the run's own dev metrics
    (run.json) were measured on: another task's (its head scores the same labels), another
    max_length or max_dev_examples, or a dev file edited since, gave other figures without a
    word (or with the -o fix for every cause), where the README promises the run's own back."""
    then, dev, task = info.get("dev"), tokenized.dev, tokenized.name
    trained = info.get("task")
    if isinstance(trained, str) and trained and trained != task and info.get("mode") != "mt-a":
        warnings.warn(
            f"--run {run_dir} was trained on task {trained!r}, not {task!r} (its head scores the "
            f"same labels): these are its metrics on {task}'s dev split, not its own; give "
            f"--task {trained} for those",
            stacklevel=2,
        )
        return
    recorded = then.get("sha256") if isinstance(then, dict) else None
    if recorded is None or recorded == tokens_sha256(dev):  # hashed only where there is one
        return
    rows, length = then.get("rows"), then.get("max_length")
    if (rows, length) == (len(dev.labels), tokenized.max_length):
        cause = (
            f"(both {rows} rows at max_length {length}): {task}'s dev data changed since it "
            "trained; score it on the dev file it trained on for its own metrics"
        )
    else:
        cause = (
            f"({rows} rows at max_length {length}) than these ({len(dev.labels)} rows at "
            f"max_length {tokenized.max_length}); give the -o it trained with (max_length, "
            "tasks.<task>.max_dev_examples) to score it as it was"
        )
    warnings.warn(
        f"--run {run_dir}: its run.json's dev metrics were measured on other dev rows {cause}",
        stacklevel=2,
    )


def run_part(run_dir: Path, kind: str) -> Path | None:
    """A run's `adapter/` or `fusion/` (`kind`); the folder itself where a pull put that part's
    files there (its config file at the top); None where it has none."""
    if (run_dir / kind).is_dir():
        return run_dir / kind
    config_file = FUSION_CONFIG if kind == "fusion" else ADAPTER_CONFIG
    return run_dir if (run_dir / config_file).is_file() else None


def check_run_parts(run_dir: Path, info: dict[str, Any], given_as: str = "--run ") -> None:
    """A run folder whose run.json says it trained an adapter or a fusion, and whose `adapter/`
    or `fusion/` is gone (`run_part`), was scored (or exported) as its head alone; `given_as`
    names the option that gave the folder."""
    mode = info.get("mode")
    needs = "fusion" if mode == "fusion" else "adapter" if mode in ADAPTER_MODES else None
    if needs is None or run_part(run_dir, needs) is not None:
        return
    raise ConfigError(
        f"{given_as}{run_dir}: its run.json says mode {mode}, but its {needs}/ folder is missing "
        "(it would be taken as its head alone); give the whole folder train or fuse wrote, "
        "or train it again"
    )


def version_on_other_base(info: Any, error: Any, ours: str) -> ConfigError:
    """A registered version `info` whose weights do not fit the config's base `ours` (`error`:
    an `OtherBaseError`), named by its version and the base it records."""
    recorded = info.tags.get("base_model")
    use = f"-o base_model={recorded}, " if recorded and recorded != ours else ""
    return ConfigError(
        f"{info.name} v{info.version} was trained on another base ({error.found}; base_model "
        f"{recorded!r}), not the config's {ours!r}; use {use}or a version trained on this base "
        "(--version N; adapterfleet adapters --all lists them)"
    )


def trainings(config: PipelineConfig) -> dict[str, TrainConfig]:
    """Every training setting of the config, by the key that sets it."""
    found = {"adapters.training": config.adapters.training}
    found.update(
        {f"adapters.task_training.{t}": c for t, c in config.adapters.task_training.items()}
    )
    found["fusion.training"] = config.fusion.training
    if config.baselines.systems:
        found["baselines.training"] = config.baselines.training
        found.update(
            {
                f"baselines.system_training.{s}": c
                for s, c in config.baselines.system_training.items()
            }
        )
    return found


def check_devices(config: PipelineConfig, *, local: bool, precision: bool = True) -> None:
    """`device: cuda` (and `cuda_graphs: true`, `precision: fp16`) needs a GPU: on this machine
    for a local run; for the pipeline's trials, `resources.gpu` (Ray gives a trial no GPU
    otherwise; whether a node has one is checked with the other resources). `precision`
    False: only evaluating, in the run's own precision (float32 for fp16 off a GPU)."""
    for where, training in trainings(config).items():
        if training.device == "cuda":
            setting, here, on_ray = f"{where}.device: cuda", "device: auto or cpu", "device: auto"
        elif training.cuda_graphs is True:
            setting, here = f"{where}.cuda_graphs: true", "cuda_graphs: false"
            on_ray = here
        elif training.precision == "fp16" and precision:  # autocast to float16 runs on CUDA only
            setting, here = f"{where}.precision: fp16", "precision: bf16 (or fp32)"
            on_ray = here
            if training.device == "cpu":
                raise ConfigError(f"{setting} needs a CUDA GPU, and device is cpu; set {here}")
        else:
            continue
        if local:
            import torch

            if not torch.cuda.is_available():
                raise ConfigError(
                    f"{setting}, but this machine has no CUDA GPU that torch "
                    f"{torch.__version__} can use; set {here}"
                )
        elif config.resources.gpu <= 0:
            raise ConfigError(
                f"{setting}, but resources.gpu is 0, so Ray gives no trial a GPU; "
                f"set resources.gpu (e.g. 1, or 0.25 to share one) or {on_ray}"
            )


def local_node(num_cpus: int | None) -> dict[str, float]:
    """What a local Ray started with `--num-cpus` will have (CPUs, GPUs torch sees)."""
    if num_cpus is not None and (isinstance(num_cpus, bool) or num_cpus < 1):
        raise ConfigError(f"--num-cpus: expected an integer >= 1, got {num_cpus}")
    import torch

    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    return {"CPU": float(num_cpus or os.cpu_count() or 1), "GPU": float(gpus)}


def check_single_run(
    config: PipelineConfig,
    task: str,
    *,
    option: str = "--task",
    mode: str | None = None,
    reduction_factor: int | None = None,
    trains: bool = True,
) -> Any:
    """`train` / `fuse` / `evaluate` (`trains` False): the task, mode and reduction factor
    given, the storage folder (its token cache), the base model's limits and this machine's
    devices; the base model's config."""
    from adapterfleet.orchestration.validate import (
        base_model_config,
        check_base_layout,
        check_pooling,
        check_storage,
    )

    if task not in config.tasks:
        known = ", ".join(sorted(config.tasks))
        raise ConfigError(f"{option}: {task!r} is not a task of the config; tasks there: {known}")
    if mode is not None and mode not in SINGLE_RUN_MODES:
        fuse = "; a fusion trains with adapterfleet fuse" if "fusion" in mode.lower() else ""
        raise ConfigError(f"--mode: {mode!r} is unknown; use {', '.join(SINGLE_RUN_MODES)}{fuse}")
    if mode in ("head", "full") and reduction_factor is not None:
        raise ConfigError(f"--reduction-factor: mode {mode} trains no adapter; leave it out")
    if mode == "mt-a":
        check_mt_a_run(config, task)
    check_storage(config)  # a file there was NotADirectoryError's traceback from the cache
    model_config = base_model_config(config.base_model)
    if mode != "head" and mode != "full":
        check_base_layout(config, model_config)
    check_pooling(config, model_config, [task])
    if reduction_factor is not None:
        check_reduction_factor(reduction_factor, int(model_config.hidden_size))
    check_max_length(config, model_config)
    check_tokenizer(config, model_config)
    check_devices(config, local=True, precision=trains)
    return model_config


def check_mt_a_run(config: PipelineConfig, task: str) -> None:
    """`train --mode mt-a` trains every task of adapters.tasks jointly, with `--task`'s
    settings and metric; each must be able to join (no regression task)."""
    tasks = list(config.adapter_tasks)
    if task not in tasks:
        raise ConfigError(
            f"--task: MT-A trains the adapters of adapters.tasks ({', '.join(tasks)}) jointly, "
            f"with --task's settings, and {task!r} is not one of them; give one, or add it"
        )
    regression = [t for t in tasks if config.tasks[t].is_regression]
    if regression:
        raise ConfigError(
            f"--mode: MT-A selects on one metric over the dev sets of every adapter task "
            f"pooled, which regression task(s) {regression} cannot join; train them with "
            "another mode, or leave them out of adapters.tasks (-o 'adapters.tasks=[...]')"
        )


def check_reduction_factor(reduction_factor: int, hidden_size: int) -> None:
    if reduction_factor < 1:
        raise ConfigError(f"--reduction-factor: expected an integer >= 1, got {reduction_factor}")
    try:
        AdapterConfig("pfeiffer", reduction_factor).bottleneck_size(hidden_size)
    except ValueError as error:
        raise ConfigError(f"--reduction-factor: {error}") from None
