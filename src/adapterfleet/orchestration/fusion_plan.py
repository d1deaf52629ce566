"""What a fusion is trained from, worked out before any training: the registered adapter
versions, the lineage key that names the fusion (same key, same fusion), the version already
registered for it (not one whose run `mlflow gc` purged), one config per fusion seed, and the
fusion's MLflow run."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from adapterfleet.adapters.base_model import names_other_base
from adapterfleet.config import ConfigError, PipelineConfig
from adapterfleet.console import Say
from adapterfleet.registry import (
    TAG_SEED,
    TAG_SYSTEM,
    MlflowRunLogger,
    ModelVersionInfo,
    fusion_model_name,
    open_fusion_run,
)
from adapterfleet.registry import descriptions as notes
from adapterfleet.registry.purged import purged_text, registered_by_tag, run_purged
from adapterfleet.registry.tags import (
    TAG_LINEAGE,
    TAG_LINEAGE_KEY,
    TAG_MAX_LENGTH,
    TAG_TORCH_THREADS,
)
from adapterfleet.training.config import TrainConfig
from adapterfleet.tuning.plan import current_keys, is_current
from adapterfleet.tuning.spec import TAG_BASE_MODEL, data_sha256, declared_layout, task_identity


def lineage_key(
    config: PipelineConfig,
    target: str,
    versions: dict[str, ModelVersionInfo],
    *,
    by_path: bool = False,
) -> str:
    """Identifies a fusion by what it was trained from: adapter versions + hashes + settings, and
    the content of the target's data files where no fused adapter stands for it (a target that
    fuses its own adapter has its data in that adapter's version; its keys stay as they were).
    `by_path`: with the paths of the target's files (`tuning.spec.task_identity`), as the keys
    of fusions registered before the paths were left out were made."""
    payload: dict[str, object] = {
        "target": target,
        "task": task_identity(config, target, by_path=by_path),
        "base_model": config.base_model,
        **declared_layout(config),
        "preset": config.fusion.preset,
        "training": _result_settings(config.fusion.training_for(target)),
        "adapters": {t: [v.version, v.sha256] for t, v in sorted(versions.items())},
    }
    data = None if target in versions else data_sha256(config, target)
    if data is not None:
        payload["data"] = data
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()


def _result_settings(training: TrainConfig) -> dict[str, object]:
    """The training settings that change the trained fusion (not how progress is shown)."""
    return {k: v for k, v in training.hash_dict().items() if k != "progress"}


@dataclass(frozen=True)
class FusionPlan:
    """What a fusion for `target` is trained from, found before any training starts."""

    target: str
    versions: dict[str, ModelVersionInfo]  # task -> the registered adapter version
    key: str  # lineage key: same key, same fusion
    lineage: str  # "task:vN,..." in the config's order
    existing: ModelVersionInfo | None  # the fusion already registered for this key, if any
    # one registered for this key whose run mlflow gc purged (not `existing`: trained again)
    purged: ModelVersionInfo | None = None
    pruned_from: str | None = None  # `prune`'s: the version of the fusion it keeps some of ("v3")

    @property
    def trial_id(self) -> str:
        return fusion_id(self.target, self.key)

    @property
    def pruned_note(self) -> str:
        """What its run's and version's descriptions start with: nothing, or that it is pruned."""
        if self.pruned_from is None:
            return ""
        return notes.pruned_note(self.target, self.pruned_from, len(self.versions))


FUSION_DIR = "fusion"  # <storage>/fusion/<target>/<lineage key[:12]>/: a fusion's work folder
FUSION_LOCK = ".training.lock"  # in the work folder: held while a job trains the fusion
PRUNE_DIR = "prune"  # <storage>/prune/<target>/v<N>/: a prune's pulled copies and report
PRUNE_LOCK = ".prune.lock"  # in <storage>/prune/<target>/: held while a prune of it runs


def fusion_work(config: PipelineConfig, target: str, key: str) -> Path:
    """The work folder of the fusion of `target` with lineage key `key` (its run, checkpoints
    and pulled adapters), kept after it is registered; its `FUSION_LOCK` is held while one
    trains it."""
    return Path(config.storage).resolve() / FUSION_DIR / target / key[:12]


def fusion_id(target: str, key: str) -> str:
    """The id of a fusion's MLflow run (and its trial): the target and its lineage key."""
    return f"fusion-{target}-{key[:12]}"


def fusion_run_name(target: str, seed: int, key: str, kept: int | None = None) -> str:
    """The name of a fusion's MLflow run, `fusion-<target>-s<seed>-<key>`: as a baseline job's
    (`<system>-<task>-s<seed>-<key>`), it tells seeds and lineages apart (every fusion run of a
    target was `fusion-<target>`); `fusion-<target>-pruned<kept>-...` for `prune`'s (they read
    as the pipeline's own fusion). A name only: the run is found again by its id's tag."""
    pruned = f"-pruned{kept}" if kept is not None else ""
    return f"fusion-{target}{pruned}-s{int(seed)}-{key[:12]}"


def plan_fusion(
    config: PipelineConfig, target: str, uri: str, versions: dict[str, ModelVersionInfo]
) -> FusionPlan:
    """The lineage of a fusion over `versions` (with `config.fusion.training`'s seed), and its
    registered version if it exists. Adapters trained on another base model are refused."""
    check_one_base(config, target, versions)
    key = lineage_key(config, target, versions)
    lineage = ",".join(f"{t}:v{versions[t].version}" for t in config.fusion.targets[target])
    name = fusion_model_name(config.registry_prefix, target)
    existing, purged = registered_by_tag(uri, name, TAG_LINEAGE_KEY, key)
    by_path = lineage_key(config, target, versions, by_path=True)
    if existing is None and by_path != key:  # registered before the paths were left out
        existing, purged_too = registered_by_tag(uri, name, TAG_LINEAGE_KEY, by_path)
        purged = purged or purged_too
    return FusionPlan(target, versions, key, lineage, existing, purged)


def current_adapter(
    config: PipelineConfig, names: dict[str, str], uri: str
) -> Callable[[ModelVersionInfo], bool]:
    """Whether a version of one of the `names` (model name -> task) is what the pipeline's
    fusion takes: registered for the config's current settings and data, and its run still
    there (the sweep trains one `mlflow gc` purged again, and replaces one of other settings)."""
    keys = {name: current_keys(config, task) for name, task in names.items()}
    return lambda info: is_current(info, keys[info.name]) and not run_purged(uri, info)


def pullable_adapter(uri: str, target: str, say: Say) -> Callable[[ModelVersionInfo], bool]:
    """`fuse --wait`'s test of an adapter's `best`: its run is still there. One whose run
    `mlflow gc` purged cannot be pulled: it is waited past (the pipeline's next run trains it
    again and moves `best`), and said once per version (it was taken, then the pull failed)."""
    said: set[tuple[str, int]] = set()

    def accept(info: ModelVersionInfo) -> bool:
        if not run_purged(uri, info):
            return True
        if (info.name, info.version) not in said:
            said.add((info.name, info.version))
            say(
                f"fusion {target}: {info.name} v{info.version} (@best) cannot be pulled: "
                f"{purged_text(info)}; waiting for the pipeline's next run to train it again"
            )
        return False

    return accept


def say_not_current(
    config: PipelineConfig, target: str, versions: dict[str, ModelVersionInfo], say: Say
) -> None:
    """`fuse --wait` takes each adapter's `best` as it is: say which were not trained for the
    config's adapter settings and data (a sweep of it would train them anew)."""
    for task, info in sorted(versions.items()):
        if not is_current(info, current_keys(config, task)):
            say(
                f"fusion {target}: {task} v{info.version} (@best) was not trained for this "
                "config's adapter settings and data (another sweep, an edited data file or an "
                "import); fusing it all the same"
            )


def check_one_base(
    config: PipelineConfig, target: str, versions: dict[str, ModelVersionInfo]
) -> None:
    """A fusion mixes adapters of one base model: each version's `base_model` tag (where it has
    one) must be the pipeline's."""
    for task, info in versions.items():
        base = info.tags.get(TAG_BASE_MODEL)
        if base is not None and names_other_base(base, config.base_model):
            raise ConfigError(
                f"fusion.targets.{target}: adapter {task} v{info.version} was trained on "
                f"base_model {base!r}, this pipeline's is {config.base_model!r}; a fusion mixes "
                "adapters of one base model: retrain it on this base, or give this pipeline its "
                "own registry_prefix"
            )


def seed_configs(config: PipelineConfig) -> list[PipelineConfig]:
    """The config of each fusion seed: `fusion.training` with that seed."""
    stage = config.fusion
    return [
        replace(config, fusion=replace(stage, training=replace(stage.training, seed=seed)))
        for seed in stage.fusion_seeds
    ]


def open_plan_run(
    config: PipelineConfig, plan: FusionPlan, uri: str, experiment_id: str
) -> MlflowRunLogger:
    """The MLflow run of the fusion: created on the first call, reopened on later ones (the
    pipeline's gate opens it the moment the adapters are found, the Ray task reopens it)."""
    params = {
        "target": plan.target,
        "adapters": plan.lineage,
        "preset": config.fusion.preset,
        **config.fusion.training_for(plan.target).run_params(),
    }
    versions = {t: plan.versions[t] for t in config.fusion.targets[plan.target]}
    epochs, preset = config.fusion.training.max_epochs, config.fusion.preset
    note = notes.fusion_run_note(plan.target, preset, config.base_model, versions, epochs)
    note = plan.pruned_note + note
    seed = config.fusion.training.seed
    kept = len(versions) if plan.pruned_from is not None else None
    return open_fusion_run(
        uri,
        experiment_id,
        plan.target,
        plan.trial_id,
        run_name=fusion_run_name(plan.target, seed, plan.key, kept),
        params=params,
        tags={
            TAG_LINEAGE: plan.lineage,
            TAG_SYSTEM: "fusion-st-a",
            TAG_SEED: seed,
            notes.TAG_NOTE: note,
            TAG_MAX_LENGTH: config.max_length,  # a fusion records no settings tag of its own
            TAG_TORCH_THREADS: max(1, int(config.resources.cpu)),
        },
    )
