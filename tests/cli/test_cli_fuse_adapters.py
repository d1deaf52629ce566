"""`fuse --adapters` given a folder that is not an adapter folder: one line naming the fix. A
train run folder said `runs/rte-st-a/adapter_config.json is missing; is runs/rte-st-a a saved
adapterfleet directory?` (it is one: a run folder, whose adapter is its adapter/)."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_cli_bad_input import CONFIG, refused, runner

from adapterfleet.cli.app import app


@pytest.fixture
def pipeline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """test_cli_bad_input's small config, target `a`; the current folder is its folder."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "t.tsv").write_text("sentence\tlabel\na b\t0\nc d\t1\n")
    path = tmp_path / "pipe.yaml"
    path.write_text(CONFIG.format(storage=tmp_path / "store"))
    return path


def _fuse(pipeline: Path, adapter: str) -> list[str]:
    return ["fuse", "-c", str(pipeline), "--target", "a", "--adapters", adapter, "--out", "o"]


def _run_folder(folder: Path, *adapters: str) -> None:
    folder.mkdir(parents=True)
    (folder / "run.json").write_text("{}\n")
    for adapter in adapters:
        (folder / adapter).mkdir(parents=True)
        (folder / adapter / "adapter_config.json").write_text("{}\n")


def test_a_train_run_folder_names_its_adapter_folder(pipeline: Path) -> None:
    _run_folder(pipeline.parent / "runs" / "rte-st-a", "adapter")
    line = refused(runner.invoke(app, _fuse(pipeline, "runs/rte-st-a")))
    assert line == (
        "error: --adapters runs/rte-st-a: a run folder; give its adapter folder: "
        "runs/rte-st-a/adapter"
    )
    assert not (pipeline.parent / "o").exists()


@pytest.mark.parametrize(
    ("adapters", "said"),
    [
        (
            ("adapters/a", "adapters/b"),
            "a run folder; give one of its adapter folders: mta/adapters/a, mta/adapters/b",
        ),
        (("fusion",), "a run folder with no adapter in it (a fusion, full or head run)"),
    ],
)
def test_other_run_folders_say_what_to_give(pipeline: Path, adapters, said) -> None:
    _run_folder(pipeline.parent / "mta", *adapters)
    refused(runner.invoke(app, _fuse(pipeline, "mta")), f"--adapters mta: {said}")


def test_a_missing_folder_does_not_exist(pipeline: Path) -> None:
    line = refused(runner.invoke(app, _fuse(pipeline, "runs/nope")))
    assert line == "error: --adapters runs/nope: does not exist; give a saved adapter folder"


def test_a_folder_of_other_files_keeps_the_library_line(pipeline: Path) -> None:
    (pipeline.parent / "other").mkdir()
    refused(
        runner.invoke(app, _fuse(pipeline, "other")),
        "other/adapter_config.json is missing; is other a saved adapterfleet directory?",
    )
