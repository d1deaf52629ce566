"""`adapterfleet adapters` and `pull` on a real registered world: versions written `v1 @best` as
`status` writes them, metrics as numbers, and a pulled folder verified."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from adapterfleet.cli.app import app

runner = CliRunner()


def _table(output: str) -> list[dict[str, str]]:
    lines = [line for line in output.splitlines() if line.startswith("|")]
    header = [cell.strip() for cell in lines[0].strip("|").split("|")]
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in lines[2:]]
    return [dict(zip(header, row, strict=True)) for row in rows]


def test_adapters_lists_versions_as_status_writes_them(world) -> None:
    result = runner.invoke(app, ["adapters", "-c", str(world.config_path)])
    assert result.exit_code == 0, result.output
    rows = {(row["kind"], row["task"]): row for row in _table(result.output)}
    assert set(rows) == {("adapter", "fruit"), ("adapter", "water"), ("fusion", "fruit")}
    assert {row["version"] for row in rows.values()} == {"v1 @best"}
    fusion = rows[("fusion", "fruit")]
    assert fusion["metric"] == "accuracy"
    assert fusion["seed"] == "0"  # versions of two seeds told apart (adapters: no tag here)
    value = fusion["value"]
    assert len(value.split(".")[1]) == 4 and 0.0 <= float(value) <= 1.0
    # another name on the same store (a mistyped -o name, or another team's server): it said
    # "(nothing to show)", naming neither the store nor what it holds
    other = runner.invoke(app, ["adapters", "-c", str(world.config_path), "-o", "name=tinysweep5"])
    assert other.exit_code == 0, other.output
    assert other.output.strip() == (
        f"nothing registered for tinysweep5 in {world.uri} yet (pipelines there: tinysweep)"
    )


def test_pull_writes_the_verified_fusion(world, tmp_path: Path) -> None:
    dest = tmp_path / "pulled"
    result = runner.invoke(
        app, ["pull", "fruit", "-c", str(world.config_path), "--to", str(dest), "--fusion"]
    )
    assert result.exit_code == 0, result.output
    assert "(sha256 verified, with its head in head/" in result.output
    assert (dest / "model_adapter_fusion.safetensors").is_file()


def _pull(world, *args: str) -> str:
    result = runner.invoke(app, ["pull", *args, "-c", str(world.config_path)])
    assert result.exit_code == 0, result.output
    return result.output


def test_a_pulled_adapter_comes_with_its_head_and_a_record(world, tmp_path: Path) -> None:
    """A pull wrote the adapter's two files alone, and its line did not say which version:
    `export` left the head behind. The adapter files stay where they were, so `fuse
    --adapters` takes the folder as before."""
    from adapterfleet.orchestration.run_folder import check_fusion_adapters
    from adapterfleet.registry import get_version, read_pulled

    dest = tmp_path / "fruit"
    output = _pull(world, "fruit", "--to", str(dest), "--version", "1")
    prefix = world.config.registry_prefix
    assert output.splitlines() == [
        f"{prefix}.adapter.fruit v1 (@best) -> {dest} (sha256 verified, with its head in head/)"
    ]
    names = sorted(p.name for p in dest.iterdir())
    assert names == ["adapter.safetensors", "adapter_config.json", "head", "pulled.json"]
    info = get_version(world.uri, f"{prefix}.adapter.fruit", version=1)
    record = read_pulled(dest)
    assert info is not None and record is not None
    assert (record["model"], record["version"], record["aliases"]) == (info.name, 1, ["best"])
    assert (record["kind"], record["task"], record["sha256"]) == ("adapter", "fruit", info.sha256)
    assert record["head_sha256"] == info.tags["adapterfleet.companion.head"].rpartition(":")[2]

    exported = tmp_path / "exported"
    result = runner.invoke(
        app, ["export", str(dest), "--format", "adapterhub", "--out", str(exported)]
    )
    assert result.exit_code == 0, result.output
    assert {"head_config.json", "model_head.safetensors"} <= {p.name for p in exported.iterdir()}
    water = tmp_path / "water"
    _pull(world, "water", "--to", str(water))
    check_fusion_adapters([dest, water], tmp_path / "fused")  # what fuse --adapters checks first


def test_a_pulled_fusion_comes_with_its_head_and_the_adapters_it_fuses(
    world, tmp_path: Path
) -> None:
    from adapterfleet.registry import get_version

    dest = tmp_path / "fusion"
    output = _pull(world, "fruit", "--fusion", "--to", str(dest))
    prefix = world.config.registry_prefix
    info = get_version(world.uri, f"{prefix}.fusion.fruit", alias="best")
    assert info is not None
    fused = ", ".join(f"{task} v{number}" for task, number in info.fused.items())
    assert output.splitlines() == [
        f"{prefix}.fusion.fruit v{info.version} (@best) -> {dest} (sha256 verified, with its "
        f"head in head/ and the adapters it fuses in adapters/: {fused})"
    ]
    assert (dest / "model_adapter_fusion.safetensors").is_file()
    assert (dest / "head" / "model_head.safetensors").is_file()
    # the dtype its base trained in, which `evaluate --run` on the folder loads it in (a pulled
    # folder recorded none, so evaluate took the config's)
    from adapterfleet.orchestration.local import read_run_info
    from adapterfleet.registry import read_pulled

    assert read_pulled(dest)["base_model_dtype"] == info.tags["base_model_dtype"] == "auto"
    assert read_run_info(dest)["base_model_dtype"] == "auto"
    for task in info.fused:
        assert (dest / "adapters" / task / "adapter.safetensors").is_file()


def test_a_pull_into_another_models_folder_says_what_it_replaced(world, tmp_path: Path) -> None:
    """Pulling an adapter where a fusion was pulled was refused, with a message saying a folder
    an earlier pull wrote is replaced; one pull over another's folder said nothing of it."""
    dest = tmp_path / "pulled"
    prefix = world.config.registry_prefix
    _pull(world, "fruit", "--fusion", "--to", str(dest))
    output = _pull(world, "water", "--to", str(dest))
    assert output.splitlines()[1] == f"replaced {prefix}.fusion.fruit v1 there"
    assert not (dest / "adapters").exists() and not (dest / "adapter_fusion_config.json").exists()
    output = _pull(world, "fruit", "--to", str(dest))
    assert output.splitlines()[1] == f"replaced {prefix}.adapter.water v1 there"

    (dest / "notes.txt").write_text("mine")
    result = runner.invoke(app, ["pull", "water", "-c", str(world.config_path), "--to", str(dest)])
    assert result.exit_code == 2
    assert (
        f"cannot pull into {dest}: it holds files this pull does not write (notes.txt), which "
        "replacing the folder would delete; give a new or empty folder (one an earlier pull "
        "wrote, as its pulled.json lists, is replaced)"
    ) in " ".join(result.output.split())
    assert (dest / "notes.txt").read_text() == "mine" and (dest / "head").is_dir()


def test_pull_fusion_of_a_task_that_is_no_fusion_target_names_the_targets(
    world, tmp_path: Path
) -> None:
    """It said `model <prefix>.fusion.water has no alias 'best'`, as if one were missing."""
    dest = tmp_path / "x"
    result = runner.invoke(
        app, ["pull", "water", "--fusion", "-c", str(world.config_path), "--to", str(dest)]
    )
    assert result.exit_code == 2
    assert result.output.strip() == (
        "error: pull --fusion: 'water' is not a fusion target of the config (fusion targets: "
        "fruit) and no fusion of it is registered; pull its adapter without --fusion"
    )
    assert not dest.exists()


def _evaluate(world, task: str, folder: Path) -> dict[str, str]:
    result = runner.invoke(
        app, ["evaluate", "-c", str(world.config_path), "--task", task, "--run", str(folder)]
    )
    assert result.exit_code == 0, result.output
    return _table(result.output)[0]


def test_evaluate_scores_a_pulled_folder_as_its_version_scored(world, tmp_path: Path) -> None:
    """`evaluate --run` refused a pulled folder: `has no run.json, head/ or heads/: it is not a
    run folder`. Now an adapter scores as the run folder it was trained in, and a fusion as
    the dev metric the registry recorded for it."""
    from adapterfleet.registry import get_version

    adapter, fusion = tmp_path / "adapter", tmp_path / "fusion"
    _pull(world, "fruit", "--to", str(adapter))
    _pull(world, "fruit", "--fusion", "--to", str(fusion))
    trained = _evaluate(world, "fruit", world.adapter_runs["fruit"])
    assert _evaluate(world, "fruit", adapter) == trained
    info = get_version(world.uri, f"{world.config.registry_prefix}.fusion.fruit", alias="best")
    assert info is not None
    scored = _evaluate(world, "fruit", fusion)
    assert float(scored["accuracy"]) == float(info.tags["dev_accuracy"])


def test_export_of_a_pulled_fusion_names_where_its_adapters_are(world, tmp_path: Path) -> None:
    """The reference loads a fusion only after its adapters; for a pulled fusion the export
    named no folder to take them from, though the pull had put them under adapters/."""
    from adapterfleet.registry import read_pulled

    fusion = tmp_path / "fusion"
    _pull(world, "fruit", "--fusion", "--to", str(fusion))
    out = tmp_path / "exported"
    result = runner.invoke(
        app, ["export", str(fusion), "--format", "adapterhub", "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    tasks = list(read_pulled(fusion)["adapters"])  # type: ignore[index]
    folders = ", ".join(str(fusion / "adapters" / task) for task in tasks)
    said = f"their own folders too (pulled.json: {folders}), then load_adapter each"
    assert said in " ".join(result.output.split())
