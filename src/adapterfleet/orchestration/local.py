"""One-machine entry points: `adapterfleet train / fuse / evaluate`; no Ray, no MLflow."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from adapterfleet.adapters import (
    HEAD_CONFIG,
    MINILM,
    AdapterModel,
    load_adapter,
    load_encoder,
    load_head,
    load_tokenizer,
    set_active_adapter,
)
from adapterfleet.adapters.base_model import names_other_base, packaged_minilm_path
from adapterfleet.adapters.config import DTYPES
from adapterfleet.adapters.files import read_config
from adapterfleet.config import (
    BaseModelSpec,
    ConfigError,
    PipelineConfig,
    override_keys,
    training_with,
)
from adapterfleet.console import Say
from adapterfleet.data import TokenizedTask, load_task, tokenize_task
from adapterfleet.data.baseline import dev_chance
from adapterfleet.data.tasks import TaskSpec
from adapterfleet.fusion import FusionConfig, load_fusion, set_active_fusion
from adapterfleet.orchestration.limits import (
    check_layout,
    check_run_folder,
    check_run_parts,
    check_single_run,
    note_other_dev,
    other_base_error,
    run_part,
)
from adapterfleet.orchestration.partial_run import adapter_files, kept_epochs, run_settings
from adapterfleet.orchestration.pulled_run import pulled_run_info
from adapterfleet.orchestration.run_folder import check_fusion_adapters, fresh_run_dir
from adapterfleet.orchestration.validate import check_storage
from adapterfleet.training import Callback, TrainConfig, evaluate
from adapterfleet.training.fused_adapters import check_unchanged, fused_adapter_dirs
from adapterfleet.training.modes import (
    ADAPTER_MODES,
    RUN_FILE,
    RunResult,
    mode_adapter,
    task_batches,
    train_fusion_run,
    train_single,
)
from adapterfleet.training.multitask import train_mt_a
from adapterfleet.tuning.trained_settings import note_pulled_settings


def prepare_task(config: PipelineConfig, task: str, tokenizer: Any = None) -> TokenizedTask:
    """Load and tokenise one task of the config, through the shared cache under storage."""
    if task not in config.tasks:
        known = ", ".join(sorted(config.tasks))
        raise ConfigError(f"task {task!r} is not a task of the config; tasks there: {known}")
    tokenizer = tokenizer or load_tokenizer(config.base_model)
    data = load_task(config.tasks[task])
    return tokenize_task(data, tokenizer, config.max_length, config.tokens_dir)


def adapter_training(
    config: PipelineConfig, task: str, mode: str = "st-a", **changes: Any
) -> TrainConfig:
    """The settings the pipeline trains `task` in `mode` with, then the given changes (None
    values are ignored, as for CLI options left out; a value out of range is refused naming
    the option). A mode `baselines.systems` trains: the baselines' settings of that system; any
    other, the task's `task_training`, and for an adapter (ST-A, or a Houlsby one no baseline
    trains) its grid's first learning rate (as its first reduction factor, `train_task`)."""
    training = config.adapters.training_for(task)
    baseline = mode in config.baselines.systems
    if baseline:
        training = config.baselines.training_for(mode, task)
    grid = mode in ADAPTER_MODES and not baseline and config.adapters.learning_rate_range is None
    if grid and changes.get("learning_rate") is None:
        changes["learning_rate"] = config.adapters.grid_for(task).learning_rates[0]
    return training_with(training, **changes)


def _reduction_factor(config: PipelineConfig, task: str, mode: str) -> int:
    """The task's grid's first; Houlsby and MT-A where the baselines train them: theirs."""
    if mode in config.baselines.systems:
        return config.baselines.reduction_factor
    return config.adapters.grid_for(task).reduction_factors[0]


def train_task(
    config: PipelineConfig,
    task: str,
    mode: str,
    out_dir: Path,
    *,
    reduction_factor: int | None = None,
    train_config: TrainConfig | None = None,
    callbacks: Sequence[Callback] = (),
    say: Say = print,
) -> RunResult:
    """Train `task` in `mode` into the run folder `out_dir` (`fresh_run_dir`: an earlier run
    there is replaced whole once this one is saved). Each finished epoch is kept in
    `<out_dir>.partial` until then (`partial_run`): after Ctrl-C the same call continues from
    the newest one (said through `say`) when the settings are the same."""
    check_single_run(config, task, mode=mode, reduction_factor=reduction_factor)
    rf = reduction_factor or _reduction_factor(config, task, mode)
    with kept_epochs(out_dir, say) as kept, fresh_run_dir(out_dir, say) as folder:
        train_config = train_config or config.adapters.training_for(task)
        names = config.adapter_tasks if mode == "mt-a" else [task]
        tasks = {name: prepare_task(config, name) for name in names}
        adapter = mode_adapter(mode, rf, config.adapters.architecture)  # st-a: as run trains it
        settings = run_settings(
            config.base, config.max_length, train_config, list(tasks.values()),
            command="train", task=task, mode=mode, reduction_factor=rf,
            **({"architecture": adapter.architecture} if adapter else {}),
        )  # fmt: skip
        start, epoch_hooks = kept.resume(settings), [kept.callback, *callbacks]
        if mode == "mt-a":
            run = train_mt_a(
                tasks,
                config.base,
                train_config,
                folder,
                reduction_factor=rf,
                metrics={name: config.tasks[name].metrics for name in tasks},
                callbacks=epoch_hooks,
                resume_from=start,
            )
        else:
            run = train_single(
                mode,
                tasks[task],
                config.base,
                train_config,
                folder,
                adapter=adapter,
                metrics=config.tasks[task].metrics,
                callbacks=epoch_hooks,
                resume_from=start,
            )
    say_unlearned(run.dev_metrics, tasks[task], train_config.metric, say)
    return dataclasses.replace(run, out_dir=Path(out_dir))


def say_unlearned(metrics: Mapping[str, Any], task: TokenizedTask, metric: str, say: Say) -> None:
    """A warning when the run's dev `metric` is no better than learning nothing scores, as
    `run` says it (`train` printed an accuracy under the majority class without a word)."""
    value, chance = metrics.get(metric), dev_chance(task)
    if isinstance(value, float) and chance is not None and (note := chance.note(metric, value)):
        say(f"warning: {task.name} dev {metric} {value:.4f}{note}: it did not learn the task")


def fuse_task(
    config: PipelineConfig,
    target: str,
    adapter_dirs: Sequence[Path],
    out_dir: Path,
    *,
    train_config: TrainConfig | None = None,
    base_model: str | BaseModelSpec | None = None,
    callbacks: Sequence[Callback] = (),
    say: Say = print,
) -> RunResult:
    """Train a fusion of `adapter_dirs` for `target` into the run folder `out_dir` (replaced
    whole, as `train_task`'s; its finished epochs kept until then, as `train_task`'s)."""
    check_single_run(config, target, option="--target")
    check_fusion_adapters(adapter_dirs, out_dir)
    if isinstance(base_model, str):  # another folder (an MT-A model/): loaded as the config says
        base_model = dataclasses.replace(config.base or BaseModelSpec(base_model), name=base_model)
    base = base_model or config.base
    with kept_epochs(out_dir, say) as kept, fresh_run_dir(out_dir, say) as folder:
        tokenized = prepare_task(config, target)
        training = train_config or config.fusion.training_for(target)
        settings = run_settings(
            base, config.max_length, training, [tokenized], command="fuse", target=target,
            adapters=adapter_files(adapter_dirs), fusion=config.fusion.preset,
        )  # fmt: skip
        run = train_fusion_run(
            tokenized,
            base,
            adapter_dirs,
            training,
            folder,
            fusion_config=FusionConfig.preset(config.fusion.preset),
            metrics=config.tasks[target].metrics,
            callbacks=[kept.callback, *callbacks],
            resume_from=kept.resume(settings),
        )
    say_unlearned(run.dev_metrics, tokenized, training.metric, say)
    return dataclasses.replace(run, out_dir=Path(out_dir))


def evaluate_run(
    config: PipelineConfig, task: str, run_dir: Path, *, overrides: Sequence[str] = ()
) -> dict[str, float]:
    """Dev metrics of a saved run directory (adapter, fusion or MT-A, with its head) on `task`:
    on the base the run trained on, loaded in the dtype it trained in, on the config's
    `training.device`, in the precision the run trained and evaluated in (its run.json; float32
    for fp16 off a GPU), so they are the run's own dev metrics. `overrides`: the command line's
    `--set`s; one of `base_model_dtype` loads the base in the config's dtype instead."""
    from adapterfleet.training.predict import prediction_dtype
    from adapterfleet.training.runtime import resolve_device

    run_dir = Path(run_dir)
    check_storage(config)  # before the run folder's problems, as check_single_run's are after
    check_run_folder(run_dir)
    info = read_run_info(run_dir)
    base = run_base(config, run_dir, info)  # another named base: refused before any load
    if "base_model_dtype" not in override_keys(overrides):
        base = recorded_dtype(base, info)
    check_single_run(config, task, trains=False)
    model = load_run(config, task, run_dir, info, base)
    tokenized = prepare_task(config, task)
    note_other_dev(run_dir, info, tokenized)
    note_pulled_settings(config, task, run_dir)  # a pulled folder: what its version trained with
    training = config.adapters.training_for(task)
    _, dev = task_batches(tokenized, training)
    names = list(dict.fromkeys([training.metric, *config.tasks[task].metrics]))
    device = resolve_device(training.device)
    precision = info.get("train_config", {}).get("precision", training.precision)
    dtype = prediction_dtype(precision, device)
    return evaluate(model.to(device).eval(), dev, names, device=device, dtype=dtype)


def read_run_info(run_dir: Path) -> dict[str, Any]:
    """The run's run.json (a corrupt one, or one whose parts have the wrong shape, refused in
    one line), or what a pulled folder's pulled.json says in its terms; empty without either."""
    if (run_dir / RUN_FILE).is_file():
        info = read_config(run_dir, RUN_FILE)
    else:
        info = pulled_run_info(run_dir)
    dirs = (info.get("lineage") or {}).get("adapter_dirs", []) if _mappings(info) else None
    if dirs is None or not isinstance(dirs, list) or not all(isinstance(d, str) for d in dirs):
        raise ConfigError(
            f"{run_dir / RUN_FILE}: lineage, train_config or lineage.adapter_dirs does not have "
            "the shape train and fuse write (a mapping, a mapping, a list of folders); restore "
            "the file or train the run again"
        )
    if not _hashes_shaped((info.get("lineage") or {}).get("adapter_sha256")):
        raise ConfigError(
            f"{run_dir / RUN_FILE}: lineage.adapter_sha256 is not what train and fuse write (a "
            "sha256, a list of them, or task: sha256), so the adapters cannot be checked; "
            "restore the file or train the run again"
        )
    return info


def _hashes_shaped(hashes: object) -> bool:
    """None (a run.json from before the hashes), one text, a list or a task mapping of them."""
    if hashes is None or isinstance(hashes, str):
        return True
    values = list(hashes.values()) if isinstance(hashes, dict) else hashes
    return isinstance(values, list) and all(isinstance(value, str) for value in values)


def _mappings(info: dict[str, Any]) -> bool:
    return all(isinstance(info.get(key) or {}, dict) for key in ("lineage", "train_config"))


def load_run(
    config: PipelineConfig, task: str, run_dir: Path, info: dict[str, Any], base: BaseModelSpec
) -> AdapterModel:
    """The run's model on `base` (the one it trained on), with `task`'s head and its adapter or
    fusion active; every adapter checked against the sha256 run.json records for it."""
    lineage = info.get("lineage") or {}
    mt_a = (run_dir / "heads").is_dir()  # MT-A: adapters/<task>/ and heads/<task>/
    if mt_a:
        check_mt_a_task(run_dir, task)
    else:
        check_run_parts(run_dir, info)
    head_dir = run_dir / "heads" / task if mt_a else run_dir / "head"
    if not mt_a and not head_dir.is_dir() and (run_dir / HEAD_CONFIG).is_file():
        head_dir = run_dir  # import-adapter's: the head beside the adapter, as AdapterHub has it
    model = AdapterModel(load_encoder(base))
    model.select_head(load_head(model, head_dir, name=task))
    check_run_head(model, task, config.tasks[task], head_dir)
    hashes = lineage.get("adapter_sha256")
    if mt_a:
        sha = hashes.get(task) if isinstance(hashes, dict) else None
        adapter = load_recorded(model, run_dir / "adapters" / task, sha, run_dir, name=task)
        set_active_adapter(model, adapter)
    elif (fusion_dir := run_part(run_dir, "fusion")) is not None:
        for adapter_dir, sha in fused_adapter_dirs(run_dir, info, fusion_dir):
            load_recorded(model, adapter_dir, sha, run_dir)
        set_active_fusion(model, load_fusion(model, fusion_dir, name=task))
    elif (adapter_dir := run_part(run_dir, "adapter")) is not None:
        sha = hashes if isinstance(hashes, str) else None
        adapter = load_recorded(model, adapter_dir, sha, run_dir, name=task)
        set_active_adapter(model, adapter)
    return model


def run_base(config: PipelineConfig, run_dir: Path, info: dict[str, Any]) -> BaseModelSpec:
    """The base a run trained on, with the config's dtype, layout and checkpointing: its own
    `model/` (full, MT-A), else the local folder run.json records (a fusion trained with
    `fuse --base-model`), else the config's base. A run trained on another base than the
    config's is refused (`check_run_base`): the tasks are tokenised with the config's."""
    recorded = str(info.get("base_model") or "")
    if recorded:
        check_run_base(run_dir, recorded, config.base_model)
    check_layout(f"--run {run_dir}", info.get("base_model_layout"), config)
    if (run_dir / "model").is_dir():
        name = str(run_dir / "model")
    elif _is_folder(recorded):
        name = recorded
    else:
        name = config.base_model
    return dataclasses.replace(config.base or BaseModelSpec(name), name=name)


def recorded_dtype(base: BaseModelSpec, info: dict[str, Any]) -> BaseModelSpec:
    """`base` in the dtype run.json records (`-o base_model_dtype=float16` at training);
    as it is for a run.json from before the record, or one recording no known dtype."""
    dtype = info.get("base_model_dtype")
    return dataclasses.replace(base, dtype=dtype) if dtype in DTYPES else base


def check_run_base(run_dir: Path, recorded: str, ours: str) -> None:
    """The run's base and the config's are one, compared as `predict` compares them (two names,
    two folders), and where the run's base is a folder here, the one whose weights evaluate
    loads, the config's has to be that folder. A run's fine-tuned `model/` (`fuse --base-model`
    on an MT-A run) stands for the base that run trained from too: the config's is that one."""
    bases = [recorded]
    while len(bases) < 4 and _is_folder(bases[-1]) and Path(bases[-1]).name == "model":
        parent = Path(bases[-1]).parent
        base = read_run_info(parent).get("base_model") if (parent / RUN_FILE).is_file() else ""
        if not base:
            break
        bases.append(str(base))
    if all(_other_base(base, ours) for base in bases):
        raise other_base_error(f"--run {run_dir}", bases[-1], ours)


def _other_base(recorded: str, ours: str) -> bool:
    if not _is_folder(recorded):
        return names_other_base(recorded, ours)
    folder = packaged_minilm_path(verify=False) if ours == MINILM else Path(ours).expanduser()
    return not folder.is_dir() or folder.resolve() != Path(recorded).resolve()


def _is_folder(name: str) -> bool:
    return name != MINILM and os.path.isdir(name)


def check_mt_a_task(run_dir: Path, task: str) -> None:
    """An MT-A run evaluates only the tasks it trained an adapter and head for."""
    folder = run_dir / "adapters"
    trained = sorted(p.name for p in folder.iterdir() if p.is_dir()) if folder.is_dir() else []
    if task not in trained or not (run_dir / "heads" / task).is_dir():
        raise ConfigError(
            f"--task {task}: {run_dir} is an MT-A run of {', '.join(trained) or '(no task)'} "
            f"and has no adapter and head of {task}; evaluate one of those tasks"
        )


def check_run_head(model: AdapterModel, task: str, spec: TaskSpec, head_dir: Path) -> None:
    """`predict`'s check that the head scores the task's labels, worded for a run folder."""
    from adapterfleet.orchestration.predict import check_head

    fix = "evaluate the run on the task it was trained for, with the config it was trained with"
    check_head(model, task, spec, head=f"the head in {head_dir}", fix=fix)


def load_recorded(
    model: AdapterModel, directory: Path, sha256: str | None, run_dir: Path, name: str | None = None
) -> str:
    """`load_adapter`, refusing an adapter whose weights changed after `run_dir` trained with
    them (retrained in place): its sha256 is not the one run.json records."""
    check_unchanged(directory, sha256, run_dir)
    return load_adapter(model, directory, name=name, sha256=sha256)
