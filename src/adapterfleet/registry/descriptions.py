"""The short texts the MLflow UI shows as descriptions, and metric values as tags.

Runs and experiments keep their description in the `mlflow.note.content` tag; registered models
and versions in their own description field (see `models.register_version`). Every text says
what the thing is and, when the process was started by the `adapterfleet` command, the command
line (`made_by`). Versions link the versions they came from with the UI's own routes
(`#/models/<name>/versions/<n>`), which the UI renders as links in its markdown descriptions.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Iterable, Mapping, Sequence

from adapterfleet.masking import masked_settings
from adapterfleet.registry.errors import safe_uri
from adapterfleet.registry.info import ModelVersionInfo

TAG_NOTE = "mlflow.note.content"  # a run's (and an experiment's) description in the UI
COMMAND_ENV = "ADAPTERFLEET_COMMAND"  # the command line, set by `adapterfleet` at its start
TAG_DIGITS = 4

BASELINE_SYSTEMS = {
    "head": "head-only training (the encoder frozen, only the task head trained)",
    "full": "full fine-tuning of the encoder and the head",
    "st-a-houlsby": "a single-task adapter in the Houlsby placement",
    "mt-a": "MT-A: adapters trained jointly on every task",
    "fusion-mt-a": "AdapterFusion over the MT-A adapters",
}


def tag_number(value: float | int | str) -> str:
    """A metric value as a tag: rounded to 4 decimals (the metric itself stays exact)."""
    return str(round(float(value), TAG_DIGITS))


def command_line() -> str:
    """The `adapterfleet` command line that started this process (or the local Ray it started),
    credentials in URIs masked; empty when no command did (the library called directly)."""
    text = os.environ.get(COMMAND_ENV, "").strip()
    try:
        return shlex.join(masked_settings(shlex.split(text)))  # `-o some_token=...` too
    except ValueError:
        return safe_uri(text)


def made_by() -> str:
    """` Made by `<command line>`.`, or empty when no command is known: the text then says
    nothing it does not know."""
    command = command_line()
    return f" Made by `{command}`." if command else ""


def version_link(info: ModelVersionInfo, label: str | None = None) -> str:
    """A markdown link to a model version's page in the MLflow UI."""
    text = label or f"{info.name} v{info.version}"
    return f"[{text}](#/models/{info.name}/versions/{info.version})"


def _listed(values: Iterable[object]) -> str:
    return ", ".join(str(v) for v in values)


def experiment_note(
    name: str,
    base_model: str,
    prefix: str,
    tasks: Sequence[str],
    targets: Sequence[str],
    baselines: Sequence[str] = (),
) -> str:
    """The pipeline's plan: what its runs are and where it registers what they make."""
    fusions = f"; fusions for {_listed(targets)} (`{prefix}.fusion.<target>`)" if targets else ""
    others = f"; baselines of the paper's Table 1: {_listed(baselines)}" if baselines else ""
    last = f" Last started by `{command_line()}`." if command_line() else ""
    return (
        f"Runs of the adapterfleet pipeline `{name}` on the base model `{base_model}`: an adapter "
        f"sweep per task ({_listed(tasks)}; each task's best adapter is registered as "
        f"`{prefix}.adapter.<task>`){fusions}{others}.{last}"
    )


def sweep_note(
    task: str,
    sweep: str,
    architecture: str,
    base_model: str,
    search: str,
    max_epochs: int,
    best: tuple[str, str, float, ModelVersionInfo] | None = None,
) -> str:
    """`search`: what the sweep tries, e.g. "a grid of reduction factors [16] × ...".
    `best`: once registered, (trial id, metric, value, registered version)."""
    text = (
        f"Adapter sweep of task `{task}` (sweep `{sweep}`): {architecture} adapters on the frozen "
        f"`{base_model}`, {search}, up to {max_epochs} epochs per trial. Its trials are the "
        f"child runs of this run.{made_by()}"
    )
    if best is not None:
        trial, metric, value, info = best
        text += (
            f"\n\nBest trial: `{trial}` (dev {metric} {tag_number(value)}), registered as "
            f"{version_link(info)}."
        )
    return text


def trial_note(
    task: str, trial: str, architecture: str, base_model: str, settings: str, max_epochs: int
) -> str:
    """`settings`: the trial's grid point, e.g. "reduction factor 16, learning rate 0.001"."""
    return (
        f"Trial `{trial}` of the adapter sweep of task `{task}`: a {architecture} adapter and "
        f"task head trained on the frozen `{base_model}` ({settings}), up to {max_epochs} "
        f"epochs.{made_by()}"
    )


def _links(versions: Mapping[str, ModelVersionInfo]) -> str:
    return _listed(version_link(v, f"{task} v{v.version}") for task, v in versions.items())


def fusion_run_note(
    target: str, preset: str, base_model: str, versions: Mapping[str, ModelVersionInfo], epochs: int
) -> str:
    return (
        f"AdapterFusion ({preset}) for task `{target}` on the frozen `{base_model}` over the "
        f"registered adapters {_links(versions)}, up to {epochs} epochs: the fusion layer and "
        f"the head are trained, the adapters stay fixed.{made_by()}"
    )


def pruned_note(target: str, source: str, kept: int) -> str:
    """What a pruned fusion's run and version descriptions start with: without it they read as
    the pipeline's own fusion of `target`."""
    return (
        f"Pruned from {source} of the fusion for `{target}` by `adapterfleet prune`: its "
        f"{kept} adapter{'s' if kept != 1 else ''} with the largest fusion weight, fused anew. "
    )


def baseline_note(system: str, tasks: Sequence[str], seed: int) -> str:
    what = BASELINE_SYSTEMS.get(system, system)
    where = f"task `{tasks[0]}`" if len(tasks) == 1 else f"tasks {_listed(tasks)}"
    return f"Baseline of the paper's Table 1: {what}, on {where}, seed {seed}.{made_by()}"


def prune_note(target: str, source: str) -> str:
    return (
        f"Pruning of the fusion for `{target}` registered as {source}: the adapters ranked by "
        f"their fusion weight, smaller fusions trained and compared on the dev set "
        f"(one step per number of adapters kept).{made_by()}"
    )


def report_note(scope: str = "all") -> str:
    """`scope`: "all", "config" (its settings as written) or its budget and `--set`."""
    settings = "as written" if scope == "config" else scope
    counted = (
        "every finished run of this experiment"
        if scope == "all"
        else f"this experiment's finished runs of the config's settings ({settings})"
    )
    return (
        f"The Table 1 and Figure 4 report of {counted}, beside the paper's numbers; every later "
        f"report of the same runs logs into this run again.{made_by()}"
    )


def adapter_model_note(task: str) -> str:
    return (
        f"Single-task (ST-A) adapters of task `{task}`, with their task head. Each version is "
        "the best trial of one adapter sweep; its tags hold the sweep, the trial, the settings "
        "and the sha256 of the weights. Alias `best`: the version fusions use."
    )


def fusion_model_note(target: str) -> str:
    return (
        f"AdapterFusion layers for task `{target}`, with their task head. Each version fuses "
        "registered adapter versions, linked in its description and named in its `adapter.<task>` "
        "tags. Alias `best`: the version in use."
    )


def adapter_version_note(
    task: str, trial: str, sweep: str, settings: str, metric: str, value: float
) -> str:
    return (
        f"Adapter of task `{task}` from trial `{trial}` of sweep `{sweep}` ({settings}): dev "
        f"{metric} {tag_number(value)}.{made_by()}"
    )


def fusion_version_note(
    target: str,
    versions: Mapping[str, ModelVersionInfo],
    metric: str,
    dev_metrics: Mapping[str, float],
) -> str:
    """The fused adapter versions as links, the dev metric and its gain over the target's own
    (ST-A) adapter when that adapter is one of them and was chosen on the same metric (a gain
    is an improvement: a fall of a lower-is-better metric such as mse)."""
    text = f"AdapterFusion for task `{target}` over {_links(versions)}."
    if metric in dev_metrics:
        value = round(float(dev_metrics[metric]), TAG_DIGITS)
        text += f" Dev {metric} {value}"
        own = versions.get(target)
        lower = own is not None and own.tags.get("metric_direction") == "min"
        text += " (lower is better)" if lower else ""
        if own is not None and own.tags.get("metric") == metric and "metric_value" in own.tags:
            st_a = round(float(own.tags["metric_value"]), TAG_DIGITS)
            gain = round(st_a - value if lower else value - st_a, TAG_DIGITS)
            text += (
                f", {gain:+} over the ST-A adapter of `{target}` "
                f"({version_link(own, f'{target} v{own.version}')}, {st_a})"
            )
        text += "."
    return text + made_by()
