"""What a registered model was trained with, against what `predict` (or `evaluate` of a pulled
folder) reads its rows with now: a warning for each of max_length and the task's text_fields
that differ, naming both values and the `-o` that reads the rows as it trained.

An adapter version records its task's settings in its `settings` tag (`tuning.settings`). A
fusion records none of its own: it was trained at the max_length of the adapters it fuses (the
fusion stage takes the adapters registered for the config's settings), so that is read from its
target's adapter, else from another adapter it fuses. A version that records no settings
(registered before the tag, or imported) says nothing.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

from adapterfleet.config import PipelineConfig
from adapterfleet.registry import ModelVersionInfo, RegistryError, adapter_model_name, get_version
from adapterfleet.registry.pulled import read_pulled
from adapterfleet.tuning.settings import TAG_SETTINGS, recorded_settings


def trained_settings(
    config: PipelineConfig, uri: str, info: ModelVersionInfo, task: str
) -> dict[str, Any]:
    """`max_length` and `text_fields` (of `task`) that version `info` was trained with, as far
    as it records them: empty when it records nothing."""
    if (info.kind or "adapter") != "fusion":
        return _recorded(info, task)
    fused = info.fused
    for source in sorted(fused, key=lambda name: name != task):  # the target's own first
        name = adapter_model_name(config.registry_prefix, source)
        try:
            adapter = get_version(uri, name, version=fused[source])
        except RegistryError:  # the pull that follows says what is wrong
            adapter = None
        settings = _recorded(adapter, task) if adapter is not None else {}
        if "max_length" in settings:
            return settings
    return {}


def _recorded(info: ModelVersionInfo, task: str) -> dict[str, Any]:
    """What an adapter version's `settings` tag says of max_length, and of the text fields when
    it is `task`'s adapter."""
    recorded = recorded_settings(info.tags.get(TAG_SETTINGS))
    if recorded is None:
        return {}
    found: dict[str, Any] = {}
    if isinstance(recorded.get("max_length"), int):
        found["max_length"] = recorded["max_length"]
    spec = recorded.get("task")
    fields = spec.get("text_fields") if isinstance(spec, dict) else None
    if info.task == task and isinstance(fields, list) and fields:
        found["text_fields"] = [str(field) for field in fields]
    return found


def settings_notes(
    config: PipelineConfig, task: str, trained: dict[str, Any], what: str, command: str
) -> list[str]:
    """A warning's text for each setting `what` (a version) was trained with otherwise than
    `command` reads `task`'s rows now."""
    notes = []
    length = trained.get("max_length")
    if length is not None and length != config.max_length:
        notes.append(
            f"{what} was trained with max_length {length}, and {command} reads its rows at "
            f"max_length {config.max_length}, which the model was not trained at; give "
            f"-o max_length={length} to read them as it was trained"
        )
    fields, now = trained.get("text_fields"), list(config.tasks[task].text_fields)
    if fields is not None and now and fields != now:
        shown = ", ".join(fields)
        notes.append(
            f"{what} was trained on tasks.{task}.text_fields [{shown}], and {command} reads "
            f"[{', '.join(now)}]: the model is given other texts than it learned from; give "
            f"-o 'tasks.{task}.text_fields=[{shown}]' (or restore the task's declaration) to "
            "read them as it was trained"
        )
    return notes


def note_pulled_settings(config: PipelineConfig, task: str, run_dir: Path) -> None:
    """`evaluate --run` of a folder `pull` wrote: a warning for each setting its version was
    trained with otherwise (read from the config's store, where the version is found by the
    model, number and sha256 its pulled.json records; nothing where it is not there)."""
    record = read_pulled(run_dir)
    if record is None or not isinstance(record.get("model"), str):
        return
    uri = config.tracking_uri
    try:
        info = get_version(uri, record["model"], version=int(record.get("version") or 0))
    except (RegistryError, ValueError, TypeError):
        return
    if info is None or info.sha256 != record.get("sha256"):  # another store's version
        return
    what = f"--run {run_dir} ({info.name} v{info.version})"
    for note in settings_notes(config, task, trained_settings(config, uri, info, task), what,
                               "evaluate"):  # fmt: skip
        warnings.warn(note, stacklevel=2)


def cut_note(max_length: int, trained: int | None = None) -> str:
    """What predict says of the rows longer than max_length: cut as training cut its own, or,
    where the model was trained at another max_length (`trained`), not as it did."""
    if trained is not None and trained != max_length:
        return (
            f"were cut at max_length {max_length} tokens, where the model was trained on rows "
            f"cut at {trained} (the model reads the first {max_length})"
        )
    return (
        f"were cut at max_length {max_length} tokens, as training cuts its rows (the model "
        "reads the first ones)"
    )
