"""`adapterfleet predict`: a registered fusion (or single adapter) with its head over an input file.

Steps: check the output (`data/prediction_output.py`: its suffix, not a folder, not the input), read
the input (any format `data/` reads; the text fields of the task's declaration, labels not
needed), find the registered version, pull it (sha256-verified) into a temporary folder, load it
with the adapter / fusion / head loaders, compute class probabilities batch by batch
(`training.predict`), write one row per input row in input order, all at once:

    row (0-based), id (when the input has one), prediction (label name), prob_<label>...

For a regression task, `prediction` is the head's number (in the labels' units) and there are no
probability columns.

A registered fusion is its run's `fusion/` folder; its head is the run's `head/` folder, and the
adapters it fuses are the versions named by its `adapter.<task>=vN` tags. A registered adapter
is its trial run's `adapter/` folder with the same run's `head/`.

The model is loaded and scores the rows in `predict_worker.py`; with `use_ray`, the rows go
through Ray Data (`predict_ray.py`). A version trained with another max_length or other text
fields than the config's now is said in a warning (`trained_settings.py`). Off a terminal, a
line says the rows done every half minute (`console.RowCount`); on one, a bar shows them.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from adapterfleet.adapters.base_model import names_other_base
from adapterfleet.config import BaseModelSpec, ConfigError, PipelineConfig
from adapterfleet.console import RowCount, Say, plural
from adapterfleet.data.errors import TaskError
from adapterfleet.data.prediction_input import read_input
from adapterfleet.data.prediction_output import (
    check_output,
    output_columns,
    output_name,
    prediction_rows,
    write_predictions,
)
from adapterfleet.data.tasks import TaskSpec
from adapterfleet.orchestration.limits import check_layout, other_base_error
from adapterfleet.registry import (
    ModelVersionInfo,
    RegistryError,
    adapter_model_name,
    fusion_model_name,
    get_version,
    pull,
    pull_companion,
    safe_uri,
)
from adapterfleet.registry.pulling import fetch_version, fused_adapter, registered_versions
from adapterfleet.registry.store import check_store
from adapterfleet.registry.tags import BEST_ALIAS, TAG_BASE_MODEL_LAYOUT
from adapterfleet.results.status_notes import fused_adapters, other_adapters
from adapterfleet.tuning.spec import TAG_BASE_MODEL
from adapterfleet.tuning.trained_settings import (
    settings_notes,
    trained_settings,
)

if TYPE_CHECKING:
    from adapterfleet.adapters import AdapterModel

HEAD_ARTIFACT = "head"
PROGRESS_PERIOD_S = 30.0  # off a terminal, a line of rows done this often


@dataclass(frozen=True)
class PredictionSummary:
    out: Path
    rows: int
    version: ModelVersionInfo


# -- what to load ----------------------------------------------------------------------------


def check_target(
    config: PipelineConfig, target: str, config_path: Path | str = "the config"
) -> None:
    if target not in config.tasks:
        known = ", ".join(sorted(config.tasks)) or "(none)"
        raise ConfigError(
            f"predict: target {target!r} is not a task of {config_path}; tasks there: {known}"
        )


def find_version(
    config: PipelineConfig,
    target: str,
    uri: str,
    *,
    adapter: bool = False,
    alias: str | None = "best",
    version: int | None = None,
    fix: str | None = None,
) -> ModelVersionInfo:
    """The registered fusion (or, with `adapter`, the adapter) of `target` to predict with;
    `fix`: what a refusal suggests, when not predict's."""
    kind = "adapter" if adapter else "fusion"
    prefix = config.registry_prefix
    name = (adapter_model_name if adapter else fusion_model_name)(prefix, target)
    if version is not None and alias not in (None, BEST_ALIAS):  # best: the option's default
        raise ConfigError(
            f"--alias {alias} and --version {version} each choose a version; give one of them"
        )
    alias = None if version is not None else alias
    info = get_version(uri, name, alias=alias, version=version)
    if info is None:
        wanted = f"version {version}" if version is not None else f"alias {alias!r}"
        other = "a fusion (leave out --adapter)" if adapter else "its adapter (--adapter)"
        asked = fix is not None  # a caller's own fix (prune's) is said as it is
        fix = fix or (
            "train and register it first (adapterfleet run), choose another --alias/--version, "
            f"or predict with {other}"
        )
        there = registered_versions(uri, name)  # "its versions: v1 (@best), v2 (@pruned-2)"
        there = f"; {there}" if there.startswith("its versions") else ""
        if not adapter and not there and target not in config.fusion.targets and not asked:
            targets = ", ".join(config.fusion.targets) or "none in this config"
            raise ConfigError(
                f"predict: {target!r} is not a fusion target of the config (fusion targets: "
                f"{targets}) and no fusion of it is registered; predict with its adapter "
                "(--adapter)"
            )  # `adapterfleet run` would never train that fusion
        raise RegistryError(
            f"no registered {kind} {name} with {wanted} in {safe_uri(uri)}{there}; {fix}"
        )
    base = info.tags.get(TAG_BASE_MODEL)
    if base is not None and names_other_base(base, config.base_model):
        raise other_base_error(f"{name} v{info.version}", base, config.base_model)
    check_layout(f"{name} v{info.version}", info.tags.get(TAG_BASE_MODEL_LAYOUT), config)
    return info


def pull_version(config: PipelineConfig, uri: str, info: ModelVersionInfo, dest: Path) -> Path:
    """Download what `info` needs into `dest`, each folder sha256-verified: `adapter/` or
    `fusion/`, the `head/` registered with it, and for a fusion the adapter versions of its
    lineage under `adapters/`."""
    prefix = config.registry_prefix
    kind = info.kind or "adapter"
    pull(uri, info.name, dest / kind, version=info.version)
    pull_companion(uri, info, HEAD_ARTIFACT, dest / HEAD_ARTIFACT)
    if kind == "fusion":
        for task, number in fusion_lineage(info).items():
            adapter = fused_adapter(uri, info, adapter_model_name(prefix, task), number)
            fetch_version(uri, adapter, dest / "adapters" / task)
    return dest


def fusion_lineage(info: ModelVersionInfo) -> dict[str, int]:
    """task -> adapter version, from the fusion's `adapter.<task>=vN` tags (refused without)."""
    out = info.fused
    if not out:
        raise RegistryError(
            f"model {info.name} version {info.version} has no adapter.<task>=vN tags naming the "
            "adapters it fuses; re-register it with the fusion stage (adapterfleet fuse --wait)"
        )
    return out


def load_model(base_model: str | BaseModelSpec, target: str, folder: Path) -> AdapterModel:
    """An `AdapterModel` with the pulled adapter or fusion of `folder` active and its head, in
    eval mode and frozen: it predicts (a fusion then holds one copy of its stacked adapters)."""
    from adapterfleet.adapters import (
        AdapterModel,
        load_adapter,
        load_encoder,
        load_head,
        set_active_adapter,
    )
    from adapterfleet.fusion import load_fusion, set_active_fusion

    model = AdapterModel(load_encoder(base_model))
    model.select_head(load_head(model, folder / HEAD_ARTIFACT, name=target))
    if (folder / "fusion").is_dir():
        for adapter_dir in sorted((folder / "adapters").iterdir()):
            load_adapter(model, adapter_dir)
        set_active_fusion(model, load_fusion(model, folder / "fusion", name=target))
    else:
        set_active_adapter(model, load_adapter(model, folder / "adapter", name=target))
    return model.requires_grad_(False).eval()


def label_names_of(spec: TaskSpec) -> list[str]:
    """The names of the classes the head scores: the task's labels (multiple choice: the names
    of the choice positions, by default its choice fields)."""
    return list(spec.label_names)


def check_head(
    model: AdapterModel,
    target: str,
    spec: TaskSpec,
    *,
    head: str = "the registered head",
    fix: str = "predict with the config the model was trained with",
) -> None:
    """`head` (registered, or a run folder's) must score the labels the config declares for
    the task (a regression head for a regression task); `fix`: what the refusal suggests."""
    config = model.heads[target].config
    if (config.head_type == "regression") != spec.is_regression:
        raise ConfigError(
            f"tasks.{target}.type: {spec.kind} but {head} is a {config.head_type} head; {fix}"
        )
    if spec.is_regression:
        return
    labels = label_names_of(spec)
    saved = list(config.label_names)
    if (saved and saved != labels) or (
        not spec.is_multiple_choice and config.num_labels != len(labels)
    ):
        raise ConfigError(
            f"tasks.{target}.label_names: {labels} but {head} scores "
            f"{saved or config.num_labels}; {fix}"
        )


# -- the command -----------------------------------------------------------------------------


@dataclass(frozen=True)
class PredictSetup:
    """What a worker needs to predict: picklable, sent to every Ray actor."""

    config: PipelineConfig
    target: str
    uri: str
    info: ModelVersionInfo
    batch_size: int
    device: str
    cuda_graphs: bool = False  # replay each batch shape's forward on a GPU (training.cuda_graphs)
    precision: str = "fp32"  # autocast as the dev evaluation did (training.precision)


def _trained_notes(
    config: PipelineConfig, target: str, info: ModelVersionInfo, say: Say
) -> dict[str, Any]:
    """A warning for each way version `info` was trained otherwise than the config reads rows
    (`trained_settings`), and for a fusion of other adapters than the config lists for it (as
    `status` says); what it was trained with."""
    trained = trained_settings(config, config.tracking_uri, info, target)
    what = f"{info.name} v{info.version}"
    notes = settings_notes(config, target, trained, what, "predict")
    if info.kind == "fusion" and target in config.fusion.targets:
        listed = config.fusion.targets[target]
        notes.append(other_adapters(what, fused_adapters(info), listed, "this config", info))
    for note in filter(None, notes):
        say(f"warning: predict {target}: {note}")
    return trained


def predict_file(
    config: PipelineConfig,
    target: str,
    input_path: Path | str,
    out: Path | str,
    *,
    adapter: bool = False,
    alias: str | None = "best",
    version: int | None = None,
    input_format: str | None = None,
    header: bool = True,
    columns: Sequence[str] | None = None,
    quotes: bool | None = None,
    encoding: str | None = None,
    id_field: str | None = None,
    batch_size: int | None = None,
    use_ray: bool = False,
    workers: int | None = None,
    config_path: Path | str = "the config",
    show_progress: bool = False,
    say: Say = print,
) -> PredictionSummary:
    """Predict every row of `input_path` with the registered model of `target`; write `out`."""
    input_path, out = Path(input_path), Path(out)  # a str from Python failed at the very end
    fmt = _checked_request(config, target, input_path, out, batch_size, workers, config_path, say)
    spec = config.tasks[target]
    data = read_input(
        spec, input_path, fmt=input_format, header=header, columns=columns, id_field=id_field,
        quotes=quotes, encoding=encoding,
    )  # fmt: skip
    uri = config.tracking_uri
    info = find_version(config, target, uri, adapter=adapter, alias=alias, version=version)
    trained = _trained_notes(config, target, info, say)
    training = config.adapters.training_for(target) if adapter else config.fusion.training
    graphs = training.cuda_graphs is not False  # auto or true: on where it can run
    rows_per_step = batch_size or training.eval_batch_size
    setup = PredictSetup(
        config, target, uri, info, rows_per_step, training.device, graphs, training.precision
    )
    say(f"predict {target}: {info.name} v{info.version}, {rows_text(len(data))} of {data.source}")
    if len(data):
        from adapterfleet.orchestration.predict_worker import scored

        title, count = f"predict {target}", len(data)
        counted = None if show_progress else RowCount(title, count, say, PROGRESS_PERIOD_S)
        progress = (show_progress, counted)
        probabilities = scored(setup, data, use_ray, workers, progress, say, trained)
        rows = prediction_rows(data, probabilities, label_names_of(spec), spec.is_regression)
    else:  # a nightly job's day without new rows: the output, empty, in its format
        say(f"predict {target}: {data.source} holds no rows; the output has none")
        rows = iter(())
    with output_refusal():
        columns = output_columns(data, label_names_of(spec), spec.is_regression)
        count = write_predictions(out, fmt, rows, columns)
    say(f"predict {target}: wrote {rows_text(count)} to {output_name(out)}")
    return PredictionSummary(out, count, info)


def rows_text(count: int) -> str:
    """`1 row`, `3,000 rows`: a count as predict's lines all write it."""
    return f"{count:,} {plural(count, 'row', bare=True)}"


def _checked_request(
    config: PipelineConfig,
    target: str,
    input_path: Path,
    out: Path,
    batch_size: int | None,
    workers: int | None,
    config_path: Path | str,
    say: Say,
) -> str:
    """The output's format once the request is sound: the paths, the numbers, the target, and
    a store that is there (from Python, one that was not was created empty)."""
    with output_refusal():
        fmt = check_output(out, input_path)
    for option, value in (("--batch-size", batch_size), ("--workers", workers)):
        if value is not None and value < 1:
            raise ConfigError(f"{option}: expected an integer >= 1, got {value}")
    check_target(config, target, config_path)
    check_store(config.tracking_uri, read_only=True, say=say)
    return fmt


@contextmanager
def output_refusal() -> Iterator[None]:
    """`--out`'s refusals (the data layer's `TaskError`) as `ConfigError`, as the request's
    others are raised."""
    try:
        yield
    except TaskError as error:
        raise ConfigError(str(error)) from None
