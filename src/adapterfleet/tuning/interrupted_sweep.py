"""An interrupted sweep that a command's settings do not resume.

Ctrl-C marks the pipeline's experiment (`registry.interrupted`) and leaves its sweep runs KILLED.
The same command goes on from there; a command whose settings differ (the `-o` or `--budget`
left out) plans a sweep of other settings, which may have nothing to do at all. It used to say
nothing of the interrupted sweep, exit 0 and take the mark off. Each sweep run records the `-o`
and `--budget` its sweep was started with, and the sweep's folder its settings, so the line
can name what to pass to continue it.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from adapterfleet.config import PipelineConfig
from adapterfleet.masking import masked_settings
from adapterfleet.registry.experiments import experiment_tags
from adapterfleet.registry.interrupted import interrupted_at
from adapterfleet.registry.status import RunRecord, experiment_runs_and_tags
from adapterfleet.registry.store import missing_store
from adapterfleet.registry.tags import TAG_BUDGET, TAG_OVERRIDES, TAG_SWEEP
from adapterfleet.tuning.settings import changed_settings, changed_text
from adapterfleet.tuning.spec import TRIALS_DIR

STAMP_CHARS = len("-20260101T000000")  # what a sweep's name has after its settings hash


@dataclass(frozen=True)
class InterruptedSweep:
    name: str
    overrides: tuple[str, ...] | None  # the `-o` it was started with; None: not recorded
    budget: str | None
    changes: list[str] = field(default_factory=list)  # `key: then → now`, where known
    same_flags: bool = False  # this command has the `-o` and budget it was started with
    elsewhere: str = ""  # this config's storage, where it left no folder: another config's sweep

    @property
    def flags(self) -> str | None:
        """`--budget cpu -o a=1`: what its command had (None: not recorded)."""
        if self.overrides is None:
            return None
        budget = [f"--budget {shlex.quote(self.budget)}"] if self.budget else []
        return " ".join(budget + [f"-o {shlex.quote(item)}" for item in self.overrides])

    def line(self) -> str:
        """What a command of other settings says of it: the flags to continue it."""
        differ = f"this command's settings differ{changed_text(self.changes)}"
        if self.elsewhere:  # the mark stays on for the config that ran it
            return (
                f"the interrupted sweep {self.name} left no folder under this config's storage "
                f"({self.elsewhere}): another config of this pipeline name, with another "
                "storage, ran it (or its folders were deleted), and it stays marked interrupted "
                "for that one; give this config its own name (-o name=...) to keep the two apart"
            )
        if self.same_flags:  # the file changed, not the command line
            given = (
                f"this command's -o/--budget ({self.flags})"
                if self.flags
                else "no -o or --budget, as this command"
            )
            return (
                f"the interrupted sweep {self.name} was started with {given}, but the config's "
                "settings changed since"
                f"{changed_text(self.changes)}, so it is not resumed: run the config as it was "
                "then to continue it"
            )
        if self.flags is None:
            return (
                f"the interrupted sweep {self.name} was started with other settings; {differ}, "
                "so it is not resumed: run it again with the -o/--budget it was started with "
                "to continue it"
            )
        started = self.flags or "no -o or --budget"
        again = f"the same -o/--budget ({self.flags})" if self.flags else "no -o or --budget"
        return (
            f"the interrupted sweep {self.name} was started with {started}; {differ}, so it is "
            f"not resumed: run it again with {again} to continue it"
        )


def other_interrupted(
    config: PipelineConfig,
    uri: str,
    digests: tuple[str, ...],
    note_of: Callable[[str], dict | None],
) -> InterruptedSweep | None:
    """The sweep an interruption of the pipeline left unfinished (the experiment carries the
    mark, its sweep runs KILLED or RUNNING), when it was started with other settings than
    `digests` (`spec.sweep_hashes`) and no later sweep of its settings ran; else None.
    `note_of`: a sweep's folder's note (`plan.read_meta`) by its name, for its settings."""
    there = bool(uri) and missing_store(uri) is None  # a store not there yet is not created
    tags = experiment_tags(uri, config.name) if there else None
    if tags is None or interrupted_at(tags) is None:  # no mark: the runs are not read
        return None
    found = experiment_runs_and_tags(uri, config.name)
    if found is None:
        return None
    sweeps = [run for run in found[0] if run.kind == "sweep" and run.tags.get(TAG_SWEEP)]
    stopped = [run for run in sweeps if run.status != "FINISHED"]
    newest = max(stopped, key=lambda run: run.start_time, default=None)
    if newest is None:
        return None
    name = newest.tags[TAG_SWEEP]
    head = name[:-STAMP_CHARS]
    heads = {f"{config.name}-{digest[:8]}" for digest in digests}
    if head in heads or _superseded(name, head, newest, sweeps):
        return None
    overrides, budget = _started_with(newest)
    changes = _changes(config, note_of(name) or {})
    now = tuple(masked_settings(o for o in config.overrides if not o.startswith("budget=")))
    same = overrides == now and budget == config.budget
    storage = Path(config.storage)
    ours = note_of(name) is not None or (storage / TRIALS_DIR / name).is_dir()
    return InterruptedSweep(name, overrides, budget, changes, same, "" if ours else str(storage))


def _superseded(name: str, head: str, newest: RunRecord, sweeps: list[RunRecord]) -> bool:
    """A later sweep of the same settings ran: it took the interrupted one's place."""
    return any(
        run.tags[TAG_SWEEP] != name
        and run.tags[TAG_SWEEP][:-STAMP_CHARS] == head
        and run.start_time > newest.start_time
        for run in sweeps
    )


def _started_with(run: RunRecord) -> tuple[tuple[str, ...] | None, str | None]:
    """The `-o` (None: a sweep from before they were recorded) and `--budget` of its run."""
    try:
        overrides = json.loads(run.tags[TAG_OVERRIDES])
    except (KeyError, ValueError):
        return None, None
    if not isinstance(overrides, list):
        return None, None
    return tuple(str(item) for item in overrides), run.tags.get(TAG_BUDGET) or None


def _changes(config: PipelineConfig, meta: dict) -> list[str]:
    """`key: then → now` for the settings the sweep's folder recorded (none: not known)."""
    recorded = meta.get("settings")
    if not isinstance(recorded, dict):
        return []
    changes = [f"tasks: {task} removed" for task in recorded if task not in config.adapter_tasks]
    for task in config.adapter_tasks:
        if isinstance(recorded.get(task), str):
            for change in changed_settings(config, task, recorded[task]):
                if change not in changes:
                    changes.append(change)
    return changes
