"""Model registry against a real SQLite store: register, alias, pull, list."""

from __future__ import annotations

import hashlib
import shutil
import threading
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
from mlflow import MlflowClient

from adapterfleet.data.baseline import Majority
from adapterfleet.registry import (
    TAG_SWEEP,
    TAG_TRIAL_ID,
    RegistryError,
    adapter_model_name,
    fusion_model_name,
    get_version,
    list_models,
    pull,
    register_version,
    set_alias,
)
from adapterfleet.training import TrainConfig

LoggedAdapter = Callable[..., tuple[str, Path]]


def _versions(uri: str, name: str) -> list[int]:
    found = MlflowClient(uri, registry_uri=uri).search_model_versions(f"name = '{name}'")
    return sorted(int(mv.version) for mv in found)


def test_register_twice_gives_one_version_with_alias_and_hash(
    sqlite_uri: str,
    sqlite_experiment: str,
    logged_adapter: LoggedAdapter,
    new_name: Callable[[str], str],
) -> None:
    run_id, weights = logged_adapter(sqlite_uri, sqlite_experiment)
    name = adapter_model_name(new_name("p"), "rte")
    tags = {TAG_TRIAL_ID: "t_00001", "metric": "accuracy", "metric_value": "0.71"}
    first = register_version(sqlite_uri, name, run_id, "adapter", weights, tags)
    again = register_version(sqlite_uri, name, run_id, "adapter", weights, tags)
    assert first == again
    assert _versions(sqlite_uri, name) == [1]
    assert first.version == 1 and first.aliases == ("best",)
    assert first.sha256 == hashlib.sha256(weights.read_bytes()).hexdigest()
    assert first.tags["metric_value"] == "0.71"
    assert first.source == f"runs:/{run_id}/adapter" and first.run_id == run_id
    assert first.task == "rte" and first.kind == "adapter"
    assert get_version(sqlite_uri, name, alias="best") == first


def test_the_same_trial_id_of_a_later_sweep_is_a_new_version(
    sqlite_uri: str,
    sqlite_experiment: str,
    logged_adapter: LoggedAdapter,
    new_name: Callable[[str], str],
) -> None:
    """Trial ids name grid points (`rte-rf16-lr0.0001-s0`), so a sweep of changed settings or
    data reuses them: its adapter was mapped onto the old sweep's version and never registered."""
    name = adapter_model_name(new_name("p"), "rte")
    run1, w1 = logged_adapter(sqlite_uri, sqlite_experiment, seed=1)
    run2, w2 = logged_adapter(sqlite_uri, sqlite_experiment, seed=2)
    point = {TAG_TRIAL_ID: "rte-rf16-lr0.0001-s0"}
    first = register_version(sqlite_uri, name, run1, "adapter", w1, {**point, TAG_SWEEP: "s-1"})
    later = register_version(sqlite_uri, name, run2, "adapter", w2, {**point, TAG_SWEEP: "s-2"})
    again = register_version(sqlite_uri, name, run2, "adapter", w2, {**point, TAG_SWEEP: "s-2"})
    assert (first.version, later.version, again.version) == (1, 2, 2)
    assert later.sha256 != first.sha256 and _versions(sqlite_uri, name) == [1, 2]


def test_register_without_trial_tag_is_idempotent_by_run_and_path(
    sqlite_uri: str,
    sqlite_experiment: str,
    logged_adapter: LoggedAdapter,
    new_name: Callable[[str], str],
) -> None:
    run_id, weights = logged_adapter(sqlite_uri, sqlite_experiment)
    name = fusion_model_name(new_name("p"), "rte")
    register_version(sqlite_uri, name, run_id, "adapter", weights, alias=None)
    info = register_version(sqlite_uri, name, run_id, "adapter", weights, alias=None)
    assert _versions(sqlite_uri, name) == [1]
    assert info.aliases == ()


def test_new_trial_adds_version_and_moves_alias(
    sqlite_uri: str,
    sqlite_experiment: str,
    logged_adapter: LoggedAdapter,
    new_name: Callable[[str], str],
) -> None:
    name = adapter_model_name(new_name("p"), "mrpc")
    run1, w1 = logged_adapter(sqlite_uri, sqlite_experiment, seed=1)
    run2, w2 = logged_adapter(sqlite_uri, sqlite_experiment, seed=2)
    register_version(sqlite_uri, name, run1, "adapter", w1, {TAG_TRIAL_ID: "a"})
    second = register_version(sqlite_uri, name, run2, "adapter", w2, {TAG_TRIAL_ID: "b"})
    assert second.version == 2
    assert get_version(sqlite_uri, name, alias="best") == second
    old = get_version(sqlite_uri, name, version=1)
    assert old is not None and old.aliases == () and old.run_id == run1
    assert get_version(sqlite_uri, name) == second  # latest
    assert get_version(sqlite_uri, name, alias="champion") is None
    assert get_version(sqlite_uri, name + "-missing", alias="best") is None


def test_concurrent_registrations_of_one_trial_converge(
    sqlite_uri: str,
    sqlite_experiment: str,
    logged_adapter: LoggedAdapter,
    new_name: Callable[[str], str],
) -> None:
    run_id, weights = logged_adapter(sqlite_uri, sqlite_experiment)
    name = adapter_model_name(new_name("p"), "sst2")
    results: list[int] = []
    errors: list[BaseException] = []
    barrier = threading.Barrier(3)

    def register() -> None:
        try:
            barrier.wait()
            info = register_version(
                sqlite_uri, name, run_id, "adapter", weights, {TAG_TRIAL_ID: "same"}
            )
            results.append(info.version)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=register) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors, errors
    assert len(_versions(sqlite_uri, name)) == 1
    assert len(set(results)) == 1 and len(results) == 3


def test_pull_verifies_hash_and_rejects_tampered_artifact(
    sqlite_uri: str,
    sqlite_home: Path,
    sqlite_experiment: str,
    logged_adapter: LoggedAdapter,
    make_adapter: Callable[..., Path],
    tmp_path: Path,
    new_name: Callable[[str], str],
) -> None:
    run_id, weights = logged_adapter(sqlite_uri, sqlite_experiment, seed=3)
    name = adapter_model_name(new_name("p"), "qnli")
    info = register_version(sqlite_uri, name, run_id, "adapter", weights, {TAG_TRIAL_ID: "x"})

    dest = tmp_path / "pulled"
    got = pull(sqlite_uri, name, dest)
    assert got == dest.resolve()
    assert sorted(p.name for p in got.iterdir()) == ["adapter.safetensors", "adapter_config.json"]
    assert (got / "adapter.safetensors").read_bytes() == weights.read_bytes()
    (got / "adapter.safetensors").write_bytes(b"an earlier pull's file")
    again = pull(sqlite_uri, name, dest)  # an earlier pull's folder is replaced
    assert (again / "adapter.safetensors").read_bytes() == weights.read_bytes()
    assert pull(sqlite_uri, name, tmp_path / "by-version", version=1).is_dir()

    # Alter the stored artifact behind the registry's back.
    stored = sqlite_home / "mlartifacts" / run_id / "artifacts" / "adapter" / "adapter.safetensors"
    assert stored.is_file()
    other = make_adapter(tmp_path / "other", seed=99) / "adapter.safetensors"
    stored.write_bytes(other.read_bytes())
    bad_dest = tmp_path / "tampered"
    with pytest.raises(RegistryError) as err:
        pull(sqlite_uri, name, bad_dest)
    message = str(err.value)
    assert info.sha256 is not None and info.sha256 in message
    assert hashlib.sha256(other.read_bytes()).hexdigest() in message
    assert not bad_dest.exists()
    assert not any(p.name.startswith(".tampered.pull-") for p in tmp_path.iterdir())


def test_pull_never_deletes_what_it_did_not_write(
    sqlite_uri: str,
    sqlite_experiment: str,
    logged_adapter: LoggedAdapter,
    tmp_path: Path,
    new_name: Callable[[str], str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A pull replaces its folder whole, so a folder holding other files, a file, and the
    current folder (`--to .`) are refused with everything left as it was."""
    run_id, weights = logged_adapter(sqlite_uri, sqlite_experiment, seed=4)
    name = adapter_model_name(new_name("p"), "sst2")
    register_version(sqlite_uri, name, run_id, "adapter", weights, {TAG_TRIAL_ID: "y"})
    work = tmp_path / "work"
    (work / "sub").mkdir(parents=True)
    (work / "notes.txt").write_text("precious")
    (tmp_path / "afile").write_text("hi")
    with pytest.raises(
        RegistryError, match=r"holds files this pull does not write \(notes.txt, sub\)"
    ):
        pull(sqlite_uri, name, work)
    with pytest.raises(RegistryError, match="it is a file, not a folder"):
        pull(sqlite_uri, name, tmp_path / "afile")
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.chdir(empty)
    with pytest.raises(RegistryError, match="it is the current folder or holds it"):
        pull(sqlite_uri, name, ".")
    assert (work / "notes.txt").read_text() == "precious" and (work / "sub").is_dir()
    assert (tmp_path / "afile").read_text() == "hi" and empty.is_dir()
    assert list(empty.iterdir()) == [] and not any(".pull-" in p.name for p in tmp_path.iterdir())


def test_a_store_moved_to_another_folder_says_where_its_artifacts_were(
    tmp_path: Path, logged_adapter: LoggedAdapter
) -> None:
    """A tester copied the storage folder elsewhere and moved the first away: predict and pull
    ended in a 77-line traceback (MLflow's `Failed to download artifacts`), as the store keeps
    the absolute artifact paths it was made with. The files are read from the store's own
    mlartifacts/ (they were refused, with the advice to train again); where that lacks them
    too, one line says where, and what to do."""
    from adapterfleet.registry import default_tracking_uri, ensure_experiment

    uri = default_tracking_uri(tmp_path / "store")
    run_id, weights = logged_adapter(uri, ensure_experiment(uri, "moved"))
    register_version(uri, "p.adapter.a", run_id, "adapter", weights, {TAG_TRIAL_ID: "t"})
    (tmp_path / "store").rename(tmp_path / "moved")
    moved = default_tracking_uri(tmp_path / "moved")
    pulled = pull(moved, "p.adapter.a", tmp_path / "out", version=1)
    assert (pulled / weights.name).read_bytes() == weights.read_bytes()  # sha256 checked too
    shutil.rmtree(tmp_path / "moved" / "mlartifacts")
    with pytest.raises(RegistryError) as refused:
        pull(moved, "p.adapter.a", tmp_path / "out2", version=1)
    said = str(refused.value)
    assert said.startswith("model p.adapter.a version 1: its files (adapter) are not at file://")
    assert f"{tmp_path / 'store'}/" in said and said.endswith(
        "does not exist: a store moved or copied to another folder still points at its artifacts "
        "where it was made, and its own mlartifacts/ does not hold them; put it back there, "
        "bring its mlartifacts/ along, or train and register again in a new store"
    )
    assert not (tmp_path / "out2").exists()


def test_pull_missing_alias_is_a_clear_error(
    sqlite_uri: str, tmp_path: Path, new_name: Callable[[str], str]
) -> None:
    name = adapter_model_name(new_name("p"), "cola")
    with pytest.raises(RegistryError, match=f"model {name} has no alias 'best'"):
        pull(sqlite_uri, name, tmp_path / "x")


def test_pull_of_a_version_or_alias_that_is_not_there_names_those_that_are(
    sqlite_uri: str,
    sqlite_experiment: str,
    logged_adapter: LoggedAdapter,
    tmp_path: Path,
    new_name: Callable[[str], str],
) -> None:
    """`pull --version 7` / `--alias nope` said only that there was none, so a user had to
    look the versions up elsewhere."""
    name = fusion_model_name(new_name("p"), "rte")
    for seed, trial in ((5, "a"), (6, "b")):
        run_id, weights = logged_adapter(sqlite_uri, sqlite_experiment, seed=seed)
        register_version(sqlite_uri, name, run_id, "fusion", weights, {TAG_TRIAL_ID: trial})
    set_alias(sqlite_uri, name, "pruned-1", 1)
    listed = r"; its versions: v1 \(@pruned-1\), v2 \(@best\)$"
    with pytest.raises(RegistryError, match=f"model {name} has no version 7 in .*{listed}"):
        pull(sqlite_uri, name, tmp_path / "x", version=7)
    with pytest.raises(RegistryError, match=f"model {name} has no alias 'nope' in .*{listed}"):
        pull(sqlite_uri, name, tmp_path / "x", alias="nope")
    assert not (tmp_path / "x").exists()


def test_list_models_by_prefix_and_kind(
    sqlite_uri: str,
    sqlite_experiment: str,
    logged_adapter: LoggedAdapter,
    new_name: Callable[[str], str],
) -> None:
    prefix = new_name("ls").replace("-", "_")
    lookalike = prefix.replace("_", "X")  # LIKE would match it via the "_" wildcard
    run_id, weights = logged_adapter(sqlite_uri, sqlite_experiment)
    for task in ("rte", "mrpc", "sst2"):
        register_version(
            sqlite_uri, adapter_model_name(prefix, task), run_id, "adapter", weights,
            {TAG_TRIAL_ID: task, "metric_value": f"0.{len(task)}"},
        )  # fmt: skip
    register_version(sqlite_uri, fusion_model_name(prefix, "rte"), run_id, "adapter", weights)
    register_version(sqlite_uri, adapter_model_name(lookalike, "rte"), run_id, "adapter", weights)
    unaliased = adapter_model_name(prefix, "wnli")
    register_version(sqlite_uri, unaliased, run_id, "adapter", weights, alias=None)

    adapters = list_models(sqlite_uri, prefix, kind="adapter")
    assert [(m.task, m.version) for m in adapters] == [
        ("mrpc", 1),
        ("rte", 1),
        ("sst2", 1),
        ("wnli", 1),
    ]
    assert [m.aliases for m in adapters] == [("best",), ("best",), ("best",), ()]
    assert adapters[1].tags["metric_value"] == "0.3" and adapters[1].sha256
    fusions = list_models(sqlite_uri, prefix, kind="fusion")
    assert [(m.name, m.kind) for m in fusions] == [(fusion_model_name(prefix, "rte"), "fusion")]
    with pytest.raises(ValueError):
        list_models(sqlite_uri, prefix, kind="head")
    # every version, newest first, each with its own aliases (`adapters --all`; a pruned fusion)
    second = register_version(
        sqlite_uri, adapter_model_name(prefix, "rte"), run_id, "adapter", weights,
        {TAG_TRIAL_ID: "rte-2"}, alias="pruned-1",
    )  # fmt: skip
    every = list_models(sqlite_uri, prefix, kind="adapter", every=True)
    assert [(m.task, m.version, m.aliases) for m in every] == [
        ("mrpc", 1, ("best",)),
        ("rte", 2, ("pruned-1",)),
        ("rte", 1, ("best",)),
        ("sst2", 1, ("best",)),
        ("wnli", 1, ()),
    ]
    assert second.version == 2
    assert [m.version for m in list_models(sqlite_uri, prefix) if m.task == "rte"] == [1]


def test_a_fusion_takes_best_only_from_a_version_that_did_not_score_better(
    sqlite_uri: str,
    sqlite_experiment: str,
    logged_adapter: LoggedAdapter,
    new_name: Callable[[str], str],
) -> None:
    """A quick `fuse --wait --epochs 1` registered its fusion @best over a better one, and
    predict, prune and status moved to it. Now `best` stays where the dev metric is better."""
    from adapterfleet.orchestration.fusion_job import FusionOutcome, point_best, registered_text

    name = fusion_model_name(new_name("p"), "rte")

    def outcome(seed: int, metric: str, value: float, alias: str | None) -> FusionOutcome:
        run_id, weights = logged_adapter(sqlite_uri, sqlite_experiment, seed=seed)
        tags = {TAG_TRIAL_ID: f"f{seed}", "metric": metric, f"dev_{metric}": str(value)}
        info = register_version(sqlite_uri, name, run_id, "fusion", weights, tags, alias=alias)
        return FusionOutcome("rte", info, {metric: value}, True, 0.0, 0.0)

    first = outcome(1, "accuracy", 0.7867, "best")
    worse = point_best(sqlite_uri, outcome(2, "accuracy", 0.5367, None), "accuracy")
    assert worse.best_kept is not None and worse.best_kept.version == first.version.version
    assert get_version(sqlite_uri, name, alias="best").version == 1
    assert registered_text(worse, "accuracy") == (
        f"registered {name} v2 (accuracy 0.5367); best stays on v1 (accuracy 0.7867), better on dev"
    )
    tied = point_best(sqlite_uri, outcome(3, "accuracy", 0.78671, None), "accuracy")
    assert tied.best_kept is None and get_version(sqlite_uri, name, alias="best").version == 3
    # the outcome (a pipeline's summary) shows the alias as it is now
    assert tied.version.aliases == ("best",) and worse.version.aliases == ()
    other_metric = point_best(sqlite_uri, outcome(4, "f1", 0.1, None), "f1")  # not comparable
    assert other_metric.best_kept is None
    assert get_version(sqlite_uri, name, alias="best").version == 4
    lower_loss = point_best(sqlite_uri, outcome(5, "mse", 0.9, None), "mse")
    assert get_version(sqlite_uri, name, alias="best").version == 5
    higher_loss = point_best(sqlite_uri, outcome(6, "mse", 1.2, None), "mse")
    assert higher_loss.best_kept is not None and higher_loss.best_kept.version == 5
    assert point_best(sqlite_uri, lower_loss, "mse").best_kept is None  # its own version
    # a fusion found registered (a config changed back) that takes `best` back says so
    found = replace(first, trained=False)
    back = point_best(sqlite_uri, found, "accuracy")
    assert get_version(sqlite_uri, name, alias="best").version == 1
    assert registered_text(back, "accuracy") == (
        f"kept {name} v1 (accuracy 0.7867, registered before); best is v1 again (it was on v5)"
    )
    assert registered_text(point_best(sqlite_uri, found, "accuracy"), "accuracy") == (
        f"kept {name} v1 (accuracy 0.7867, registered before)"  # it was there: nothing moved
    )
    # a fusion early stopping ended says so, as a trial's line does (it stopped at 4/9 unsaid)
    training = TrainConfig(learning_rate=1e-3, max_epochs=9, patience=3)
    stopped = replace(worse, stopped=training.patience_note("early_stopping", 4))
    assert registered_text(stopped, "accuracy") == (
        f"registered {name} v2 (accuracy 0.5367), patience 3 ended it at epoch 4/9; best stays "
        "on v1 (accuracy 0.7867), better on dev"
    )
    assert training.patience_note("max_epochs", 9) == ""


def test_a_fusion_on_another_base_is_not_ranked_against_best(
    sqlite_uri: str,
    sqlite_experiment: str,
    logged_adapter: LoggedAdapter,
    new_name: Callable[[str], str],
) -> None:
    """The same config run again on another base kept `best` on the first base's fusion (its
    dev score was higher), while the adapters' `best` moved to the new base: predict then
    loaded a fusion its base could not take. A fusion on another base is not compared."""
    from adapterfleet.orchestration.fusion_job import FusionOutcome, point_best, registered_text

    name = fusion_model_name(new_name("p"), "sim")

    def outcome(seed: int, base: str, value: float, alias: str | None) -> FusionOutcome:
        run_id, weights = logged_adapter(sqlite_uri, sqlite_experiment, seed=seed)
        tags = {TAG_TRIAL_ID: f"f{seed}", "metric": "pearson", "dev_pearson": str(value)}
        tags["base_model"] = base
        info = register_version(sqlite_uri, name, run_id, "fusion", weights, tags, alias=alias)
        return FusionOutcome("sim", info, {"pearson": value}, True, 0.0, 0.0)

    outcome(1, "minilm-l6", 0.0308, "best")
    other = point_best(sqlite_uri, outcome(2, "/models/llama", 0.0160, None), "pearson")
    assert other.best_kept is None and get_version(sqlite_uri, name, alias="best").version == 2
    assert registered_text(other, "pearson") == (
        f"registered {name} v2 (pearson 0.0160); best moves here from v1, a fusion on minilm-l6"
    )
    same = point_best(sqlite_uri, outcome(3, "/models/llama", 0.0100, None), "pearson")
    assert same.best_kept is not None and same.best_kept.version == 2  # one base: ranked


def test_a_fusion_on_other_data_of_its_target_is_not_ranked_against_best(
    sqlite_uri: str,
    sqlite_experiment: str,
    logged_adapter: LoggedAdapter,
    new_name: Callable[[str], str],
) -> None:
    """A tester replaced the target's dev file and ran again: the new fusion scored 0.3333 on
    it, and `best` stayed on v1 for its 0.5667 on the old file, which scored 0.3333 on the new
    one too; predict kept serving v1. Scores on two dev files rank neither fusion."""
    from adapterfleet.orchestration.fusion_job import FusionOutcome, point_best, registered_text

    name = fusion_model_name(new_name("p"), "senti")

    def outcome(seed: int, data: str | None, value: float, alias: str | None) -> FusionOutcome:
        run_id, weights = logged_adapter(sqlite_uri, sqlite_experiment, seed=seed)
        tags = {TAG_TRIAL_ID: f"f{seed}", "metric": "accuracy", "dev_accuracy": str(value)}
        tags |= {"base_model": "minilm-l6"} | ({"data_sha256": data} if data else {})
        info = register_version(sqlite_uri, name, run_id, "fusion", weights, tags, alias=alias)
        return FusionOutcome("senti", info, {"accuracy": value}, True, 0.0, 0.0)

    first = outcome(1, "aaa", 0.5667, "best")
    edited = point_best(sqlite_uri, outcome(2, "bbb", 0.3333, None), "accuracy")
    assert edited.best_kept is None and get_version(sqlite_uri, name, alias="best").version == 2
    assert registered_text(edited, "accuracy") == (
        f"registered {name} v2 (accuracy 0.3333); best moves here from v1, a fusion on other "
        "data of senti"
    )
    same = point_best(sqlite_uri, outcome(3, "bbb", 0.2, None), "accuracy")
    assert same.best_kept is not None and same.best_kept.version == 2  # one dev file: ranked
    back = point_best(sqlite_uri, replace(first, trained=False), "accuracy")  # files restored
    assert get_version(sqlite_uri, name, alias="best").version == 1
    assert registered_text(back, "accuracy").endswith(
        "; best is v1 again (it was on v2, a fusion on other data of senti)"
    )
    untagged = point_best(sqlite_uri, outcome(4, None, 0.1, None), "accuracy")  # before the tag
    assert untagged.best_kept is not None and untagged.best_kept.version == 1
    at_majority = replace(untagged, chance=Majority("neg", 0.95))  # what one label scores
    assert registered_text(at_majority, "accuracy").endswith(
        "better on dev; no better than always answering 'neg' (0.9500 of dev)"
    )


def test_a_fusion_over_adapters_whose_best_moved_on_is_not_ranked_against_best(
    sqlite_uri: str,
    sqlite_experiment: str,
    logged_adapter: LoggedAdapter,
    new_name: Callable[[str], str],
) -> None:
    """Settings changed, then changed back: the adapters' `best` went back to v1, their own
    settings' version, while the fusion's stayed on the one over v2 (better on dev), which
    `status` said the next run would replace, and no run did; predict served it."""
    from adapterfleet.orchestration.fusion_job import FusionOutcome, point_best, registered_text

    prefix = new_name("p")
    name, adapter = fusion_model_name(prefix, "senti"), adapter_model_name(prefix, "senti")
    for version in (1, 2):
        run_id, weights = logged_adapter(sqlite_uri, sqlite_experiment, seed=version)
        register_version(
            sqlite_uri, adapter, run_id, "adapter", weights, {TAG_TRIAL_ID: f"a{version}"}
        )

    def outcome(seed: int, fuses: int, value: float, alias: str | None) -> FusionOutcome:
        run_id, weights = logged_adapter(sqlite_uri, sqlite_experiment, seed=10 + seed)
        tags = {TAG_TRIAL_ID: f"f{seed}", "metric": "accuracy", "dev_accuracy": str(value)}
        tags |= {"base_model": "minilm-l6", "adapter.senti": f"v{fuses}"}
        info = register_version(sqlite_uri, name, run_id, "fusion", weights, tags, alias=alias)
        return FusionOutcome("senti", info, {"accuracy": value}, True, 0.0, 0.0)

    outcome(1, 2, 0.5167, "best")  # over v2, the adapters' @best then
    set_alias(sqlite_uri, adapter, "best", 1)  # the settings changed back: v1 is theirs
    back = point_best(sqlite_uri, outcome(2, 1, 0.5, None), "accuracy")
    assert back.best_kept is None and get_version(sqlite_uri, name, alias="best").version == 2
    assert registered_text(back, "accuracy") == (
        f"registered {name} v2 (accuracy 0.5000); best moves here from v1, a fusion over adapters "
        "whose @best has moved on (senti v2 → v1)"
    )
    same = point_best(sqlite_uri, outcome(3, 1, 0.4, None), "accuracy")
    assert same.best_kept is not None and same.best_kept.version == 2  # one adapter: ranked


def test_a_fusion_whose_run_mlflow_gc_purged_is_registered_anew_and_takes_best(
    sqlite_uri: str,
    sqlite_experiment: str,
    logged_adapter: LoggedAdapter,
    new_name: Callable[[str], str],
) -> None:
    """A fusion's run purged by `mlflow gc` (its version kept, its files not): the rerun found
    it `already registered for these adapters and settings`; trained again, the same lineage
    (its trial id) was mapped onto the purged version, and `best` stayed there when it had
    scored better. Now it is passed over, registered anew, and `best` moves off it."""
    from tuning_support import mlflow_gc

    from adapterfleet.orchestration.fusion_job import FusionOutcome, point_best, registered_text
    from adapterfleet.registry.purged import purged_runs, registered_by_tag
    from adapterfleet.registry.tags import TAG_LINEAGE_KEY

    name = fusion_model_name(new_name("p"), "rte")
    tags = {TAG_TRIAL_ID: "fusion-rte-abc", TAG_LINEAGE_KEY: "abc", "metric": "accuracy"}
    run1, w1 = logged_adapter(sqlite_uri, sqlite_experiment, seed=1)
    first = register_version(sqlite_uri, name, run1, "fusion", w1, {**tags, "dev_accuracy": "0.9"})
    assert registered_by_tag(sqlite_uri, name, TAG_LINEAGE_KEY, "abc") == (first, None)
    mlflow_gc(sqlite_uri, [run1])
    assert purged_runs(sqlite_uri, [run1, None]) == {run1}
    gone = get_version(sqlite_uri, name, version=1)
    assert registered_by_tag(sqlite_uri, name, TAG_LINEAGE_KEY, "abc") == (None, gone)
    run2, w2 = logged_adapter(sqlite_uri, sqlite_experiment, seed=2)
    assert purged_runs(sqlite_uri, [run1, run2]) == {run1}  # one query for both
    second = register_version(
        sqlite_uri, name, run2, "fusion", w2, {**tags, "dev_accuracy": "0.5"}, alias=None
    )
    assert second.version == 2 and _versions(sqlite_uri, name) == [1, 2]
    assert registered_by_tag(sqlite_uri, name, TAG_LINEAGE_KEY, "abc")[0] == second
    moved = point_best(
        sqlite_uri, FusionOutcome("rte", second, {"accuracy": 0.5}, True, 0, 0), "accuracy"
    )
    assert moved.best_kept is None and get_version(sqlite_uri, name, alias="best").version == 2
    assert registered_text(moved, "accuracy") == (
        f"registered {name} v2 (accuracy 0.5000); best moves here from v1, whose run mlflow gc "
        "purged"
    )


def test_fuse_wait_waits_past_an_adapter_whose_run_mlflow_gc_purged(
    sqlite_uri: str,
    sqlite_experiment: str,
    logged_adapter: LoggedAdapter,
    new_name: Callable[[str], str],
) -> None:
    """`fuse --wait` took an adapter's `best` whose run `mlflow gc` purged, then failed at the
    pull. Now it says why once and waits for the version the pipeline's next run registers."""
    from tuning_support import mlflow_gc

    from adapterfleet.orchestration.fusion_plan import pullable_adapter
    from adapterfleet.registry import RegistryTimeout, wait_for_models

    name = adapter_model_name(new_name("p"), "rte")
    run1, w1 = logged_adapter(sqlite_uri, sqlite_experiment, seed=1)
    register_version(sqlite_uri, name, run1, "adapter", w1)
    mlflow_gc(sqlite_uri, [run1])
    said: list[str] = []
    accept = pullable_adapter(sqlite_uri, "mrpc", said.append)
    with pytest.raises(RegistryTimeout):
        wait_for_models(sqlite_uri, [name], timeout_s=1.0, poll_s=0.2, accept=accept)
    assert said == [
        f"fusion mrpc: {name} v1 (@best) cannot be pulled: its run {run1} is no longer in the "
        "tracking store, nor are its files (deleted, then purged by mlflow gc); waiting for the "
        "pipeline's next run to train it again"
    ]  # once, for all its polls
    run2, w2 = logged_adapter(sqlite_uri, sqlite_experiment, seed=2)
    register_version(sqlite_uri, name, run2, "adapter", w2)  # @best moves to v2
    found = wait_for_models(sqlite_uri, [name], timeout_s=5.0, poll_s=0.2, accept=accept)
    assert found[name].version == 2 and len(said) == 1
