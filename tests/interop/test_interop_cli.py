"""`adapterfleet export` and `adapterfleet import-adapter` as a user runs them: real processes,
exit codes, one-line errors."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import torch
from safetensors.torch import load_file

from adapterfleet.adapters import (
    ADAPTER_WEIGHTS,
    AdapterConfig,
    AdapterModel,
    HeadConfig,
    add_adapter,
    load_encoder,
    save_adapter,
    save_head,
)

ROOT = Path(__file__).resolve().parents[2]


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "adapterfleet.cli.app", *map(str, args)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_export_then_import_round_trips_a_run_folder(ours, tmp_path):
    result = _run("export", ours / "run", "--format", "adapterhub", "--out", tmp_path / "ref")
    assert result.returncode == 0, result.stderr
    assert "| adapter | a" in result.stdout and "a, b" in result.stdout
    assert not list((tmp_path / "ref").glob("*.bin"))  # safetensors only, unless --torch-bin
    assert (  # the fusion mixes a (in the run) and b (not): the export alone does not load
        "the reference loads the fusion only after the adapters it mixes: export b from its own "
        "folder too, then load_adapter each" in result.stdout
    )
    old_readers = tmp_path / "old"
    result = _run(
        "export", ours / "run", "--format", "adapterhub", "--out", old_readers, "--torch-bin"
    )
    assert result.returncode == 0, result.stderr
    assert (old_readers / "pytorch_adapter.bin").is_file()
    result = _run("import-adapter", tmp_path / "ref", "--out", tmp_path / "back", "--name", "rte")
    assert result.returncode == 0, result.stderr
    before = load_file(ours / "run" / "adapter" / ADAPTER_WEIGHTS)
    after = load_file(tmp_path / "back" / ADAPTER_WEIGHTS)
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert json.loads((tmp_path / "back" / "adapter_config.json").read_text())["name"] == "rte"


def test_refusals_and_unknown_formats_are_one_line_and_exit_2(exported, tmp_path):
    folder = tmp_path / "phm"
    folder.mkdir()
    meta = json.loads((exported / "adapter_config.json").read_text())
    meta["config"]["phm_layer"] = True
    (folder / "adapter_config.json").write_text(json.dumps(meta))
    (folder / "pytorch_adapter.bin").write_bytes((exported / "pytorch_adapter.bin").read_bytes())
    result = _run("import-adapter", folder, "--out", tmp_path / "out")
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "config.phm_layer=True" in errors[0]
    result = _run("export", exported, "--format", "peft", "--out", tmp_path / "x")
    assert result.returncode == 2 and "--format 'peft' is unknown" in result.stderr


def test_an_out_folder_whose_files_a_conversion_would_replace_is_refused(ours, exported, tmp_path):
    """`export RUN --out RUN/adapter` wrote the reference's adapter_config.json over the run's
    own (the run no longer evaluated); a folder of other files got the export mixed in; a file
    as --out was a FileExistsError traceback."""
    import shutil

    import pytest

    from adapterfleet.interop import InteropError, export_adapterhub, import_adapterhub

    run = tmp_path / "run"
    shutil.copytree(ours / "run", run)
    (run / "run.json").write_text("{}")  # what makes it a run folder
    before = {p: p.read_bytes() for p in run.rglob("*") if p.is_file()}
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "notes.txt").write_text("mine")
    (tmp_path / "a-file").write_text("mine")
    cases = [
        (export_adapterhub, run, run / "adapter", "is inside the source"),
        (import_adapterhub, exported, run / "adapter", "holds files this would replace or mix"),
        (export_adapterhub, run, notes, "holds files this would replace or mix with (notes.txt)"),
        (export_adapterhub, run, ours / "b", "holds files this would replace or mix with (adapt"),
        (import_adapterhub, exported, tmp_path / "a-file", "is a file; give a folder"),
        (export_adapterhub, tmp_path / "none", tmp_path / "x", "none does not exist; give the"),
        (import_adapterhub, tmp_path / "none", tmp_path / "x", "none does not exist; give the"),
        (import_adapterhub, tmp_path / "a-file", tmp_path / "x", "a-file is a file, not a folder"),
    ]
    for convert, source, out, said in cases:
        with pytest.raises(InteropError, match=re.escape(said)):
            convert(source, out)
    assert {p: p.read_bytes() for p in run.rglob("*") if p.is_file()} == before
    assert [p.name for p in notes.iterdir()] == ["notes.txt"]
    again = tmp_path / "again"  # an earlier conversion's folder is written over
    for _ in range(2):
        export_adapterhub(ours / "run", again)
        import_adapterhub(exported, tmp_path / "back")
    result = _run("export", run, "--format", "adapterhub", "--out", tmp_path / "a-file")
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert "a-file is a file; give a folder to write into" in result.stderr


def test_no_head_exports_a_run_or_pulled_folder_without_its_head(ours, tmp_path):
    """A run folder (adapter/, fusion/, head/) or a folder `pull` wrote (the adapter at the top,
    head/ inside) was exported with its head, always, though refusals said to export the adapter
    alone."""
    pulled = tmp_path / "pulled"
    shutil.copytree(ours / "run" / "adapter", pulled)
    shutil.copytree(ours / "run" / "head", pulled / "head")
    adapter = ["adapter.safetensors", "adapter_config.json"]
    fusion = ["adapter_fusion_config.json", "model_adapter_fusion.safetensors"]
    for source, written in ((ours / "run", adapter + fusion), (pulled, adapter)):
        out = tmp_path / f"{source.name}-ref"
        result = _run("export", source, "--format", "adapterhub", "--out", out, "--no-head")
        assert result.returncode == 0, result.stderr
        assert sorted(p.name for p in out.iterdir()) == written
        assert "| adapter | a" in result.stdout and "| head" not in result.stdout
    head = ours / "run" / "head"
    result = _run("export", head, "--format", "adapterhub", "--out", tmp_path / "h", "--no-head")
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert f"error: {head} holds a head alone, which --no-head leaves out" in result.stderr
    assert not (tmp_path / "h").exists()


def test_a_run_folder_that_lost_its_adapter_is_refused_not_exported_as_its_head(ours, tmp_path):
    """`export RUN` of an st-a run whose adapter/ was gone wrote the head alone and exit 0."""
    run = Path(shutil.copytree(ours / "run", tmp_path / "run"))
    shutil.rmtree(run / "adapter")
    shutil.rmtree(run / "fusion")
    lineage = {"adapter_dirs": [], "adapter_sha256": {}}
    (run / "run.json").write_text(json.dumps({"mode": "st-a", "lineage": lineage}))
    result = _run("export", run, "--format", "adapterhub", "--out", tmp_path / "ref")
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert (
        f"error: {run}: its run.json says mode st-a, but its adapter/ folder is missing (it would "
        "be taken as its head alone)" in result.stderr
    )
    assert not (tmp_path / "ref").exists()


def test_regression_and_multiple_choice_runs_export(bases, tmp_path):
    """`export RUN` of a regression or multiple-choice task's run said `head_type 'regression'
    cannot be exported; adapterfleet exports classification heads`."""
    heads = {  # task -> our head, what the reference's head config says of it
        "sim": (HeadConfig("regression", 1, value_range=[0, 5]), "classification", "num_labels"),
        "qa": (HeadConfig("multiple_choice", 4), "multiple_choice", "num_choices"),
    }
    for task, (head, head_type, count) in heads.items():
        model = AdapterModel(load_encoder(str(bases["bert"])))
        add_adapter(model, task, AdapterConfig("pfeiffer", 8))
        model.add_head(task, head)
        save_adapter(model, task, tmp_path / task / "adapter")
        save_head(model, task, tmp_path / task / "head")
        (tmp_path / task / "run.json").write_text("{}")
        out = tmp_path / f"{task}-ref"
        result = _run("export", tmp_path / task, "--format", "adapterhub", "--out", out)
        assert result.returncode == 0, result.stderr
        config = json.loads((out / "head_config.json").read_text())["config"]
        assert (config["head_type"], config[count]) == (head_type, head.num_labels)
        assert f"| head    | {task}" in result.stdout
        assert "config.pad_token_id" not in result.stdout  # an encoder's head: its first token


def test_a_decoders_head_export_says_how_the_reference_finds_its_last_token(bases, tmp_path):
    """The reference's decoder head finds the last real token from the model's
    config.pad_token_id, which Llama and GPT-2 configs lack: its outputs on a padded batch
    differed from ours, and export said nothing."""
    model = AdapterModel(load_encoder(str(bases["llama"])))
    add_adapter(model, "t", AdapterConfig("pfeiffer", 8))
    model.add_head("t", HeadConfig(num_labels=2))
    save_adapter(model, "t", tmp_path / "run" / "adapter")
    save_head(model, "t", tmp_path / "run" / "head")
    (tmp_path / "run" / "run.json").write_text("{}")
    result = _run("export", tmp_path / "run", "--format", "adapterhub", "--out", tmp_path / "ref")
    assert result.returncode == 0, result.stderr
    assert result.stdout.rstrip().endswith(
        "the head reads the last real token, which the reference finds from the model's "
        "config.pad_token_id: set it to the pad token adapterfleet pads with (the tokenizer's, "
        "else its end-of-sequence token) and pad on the right, or its outputs on a padded "
        "batch differ"
    ), result.stdout


def test_an_out_or_to_folder_under_a_file_is_one_line_and_exit_2(ours, exported, tmp_path):
    """A file where the folder would go was 40 lines of FileExistsError or NotADirectoryError
    (exit 1) from export, import-adapter and pull, after the work for export and import."""
    (tmp_path / "afile").write_text("")
    out = tmp_path / "afile" / "sub"
    commands = [
        ["export", ours / "run", "--format", "adapterhub", "--out", out],
        ["import-adapter", exported, "--out", out],
        ["pull", "demo_aspect", "-c", "demo", "-o", f"storage={tmp_path}/runs", "--to", out],
    ]
    for command in commands:
        result = _run(*command)
        option = "--to" if command[0] == "pull" else "--out"
        assert result.returncode == 2, (command[0], result.stderr)
        assert result.stderr.strip() == (
            f"error: {option}: cannot write {out} ({tmp_path / 'afile'} is a file, not a "
            "folder); give a folder that can be made there"
        ), (command[0], result.stderr)
    assert not (tmp_path / "runs").exists()  # refused before a store was made
