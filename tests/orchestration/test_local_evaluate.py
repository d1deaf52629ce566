"""`adapterfleet evaluate` (`evaluate_run`) on every kind of run folder it is given: ST-A, a
fusion over an MT-A run's fine-tuned base, MT-A itself, and the folders it must refuse in one
line. A tiny random BERT with the packaged MiniLM tokenizer (`tiny_model`), one epoch each."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from local_support import FAST

from adapterfleet.config import PipelineConfig
from adapterfleet.errors import UserError
from adapterfleet.orchestration.commands import fusion_training
from adapterfleet.orchestration.local import adapter_training, evaluate_run, fuse_task, train_task


@pytest.fixture(scope="module")
def st_a(config: PipelineConfig, root: Path):
    training = adapter_training(config, "fruit", **FAST)
    return train_task(config, "fruit", "st-a", root / "st-a", train_config=training)


@pytest.fixture(scope="module")
def mta(config: PipelineConfig, root: Path):
    training = adapter_training(config, "fruit", **FAST)
    return train_task(config, "fruit", "mt-a", root / "mta", train_config=training)


@pytest.fixture(scope="module")
def mta_fusion(config: PipelineConfig, root: Path, mta):
    """`fuse --base-model mta/model` run from `root`: the base given relative to it."""
    training = fusion_training(config, "score", **FAST)
    adapters = [Path("mta/adapters/fruit"), Path("mta/adapters/water")]
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(root)
        return fuse_task(config, "score", adapters, Path("fusion"), train_config=training,
                         base_model="mta/model")  # fmt: skip


def test_a_corrupt_run_file_is_one_line_naming_it(config, st_a, tmp_path) -> None:
    run = Path(shutil.copytree(st_a.out_dir, tmp_path / "run"))
    (run / "run.json").write_text("{bad")
    with pytest.raises(UserError) as caught:
        evaluate_run(config, "fruit", run)
    message = str(caught.value)
    assert message.startswith(f"{run / 'run.json'} is not valid JSON (")
    assert "\n" not in message
    info = json.loads((st_a.out_dir / "run.json").read_text())
    for bad in ({"lineage": 7}, {"train_config": "oops"}, {"lineage": {"adapter_dirs": "a"}}):
        (run / "run.json").write_text(json.dumps({**info, **bad}))  # was an AttributeError
        with pytest.raises(UserError, match="does not have the shape train and fuse write"):
            evaluate_run(config, "fruit", run)
    lineage = info["lineage"]
    for bad in (7, [7], {"fruit": None}):  # was read as "no hash recorded": never checked
        (run / "run.json").write_text(
            json.dumps({**info, "lineage": {**lineage, "adapter_sha256": bad}})
        )
        with pytest.raises(UserError, match=r"lineage.adapter_sha256 is not what train and fuse"):
            evaluate_run(config, "fruit", run)


def test_a_run_folder_without_its_adapter_or_fusion_is_refused(
    config, root, st_a, mta_fusion, tmp_path
) -> None:
    """Scored as its head alone (0.78 for a user's ST-A folder whose adapter/ was gone, above
    the run's own 0.76), without a word."""
    for run, part in ((st_a.out_dir, "adapter"), (root / "fusion", "fusion")):
        copy = Path(shutil.copytree(run, tmp_path / part))
        shutil.rmtree(copy / part)
        mode = json.loads((copy / "run.json").read_text())["mode"]
        task = "fruit" if part == "adapter" else "score"
        with pytest.raises(UserError) as caught:
            evaluate_run(config, task, copy)
        assert str(caught.value) == (
            f"--run {copy}: its run.json says mode {mode}, but its {part}/ folder is missing (it "
            "would be taken as its head alone); give the whole folder train or fuse wrote, or "
            "train it again"
        )


def test_evaluating_on_other_dev_rows_than_the_run_was_scored_on_is_said(config, st_a) -> None:
    """evaluate "gives the run's own dev metrics back"; with another max_length or
    max_dev_examples it gave other figures without a word (0.5162 for a run.json's 0.5312)."""
    info = json.loads((st_a.out_dir / "run.json").read_text())
    assert info["dev"]["rows"] == 16 and info["dev"]["max_length"] == config.max_length
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*other dev rows")  # the same rows: none
        assert evaluate_run(config, "fruit", st_a.out_dir) == pytest.approx(st_a.dev_metrics)
    shorter = dataclasses.replace(config, max_length=6)  # cuts the sentences
    with pytest.warns(UserWarning) as said:
        evaluate_run(shorter, "fruit", st_a.out_dir)
    assert [str(w.message) for w in said] == [
        f"--run {st_a.out_dir}: its run.json's dev metrics were measured on other dev rows (16 "
        f"rows at max_length {config.max_length}) than these (16 rows at max_length 6); give "
        "the -o it trained with (max_length, tasks.<task>.max_dev_examples) to score it as it was"
    ]


def test_a_run_scored_on_another_task_or_an_edited_dev_file_is_said_so(
    config, st_a, tmp_path
) -> None:
    """A fruit run given `--task water` (its head scores the same labels) was scored on water
    with only the warning of other dev rows, whose fix (the -o of max_length or
    max_dev_examples it trained with) could not help; so was a dev file edited since."""
    with pytest.warns(UserWarning) as said:
        evaluate_run(config, "water", st_a.out_dir)
    assert [str(w.message) for w in said] == [
        f"--run {st_a.out_dir} was trained on task 'fruit', not 'water' (its head scores the "
        "same labels): these are its metrics on water's dev split, not its own; give --task "
        "fruit for those"
    ]
    spec = config.tasks["fruit"]
    rows = spec.dev.path.read_text().splitlines()
    text, label = rows[1].split("\t")
    edited = tmp_path / "fruit_dev.tsv"
    edited.write_text("\n".join([rows[0], f"{text} today\t{label}", *rows[2:]]) + "\n")
    tasks = {**config.tasks, "fruit": dataclasses.replace(
        spec, dev=dataclasses.replace(spec.dev, path=edited))}  # fmt: skip
    with pytest.warns(UserWarning) as said:
        evaluate_run(dataclasses.replace(config, tasks=tasks), "fruit", st_a.out_dir)
    assert [str(w.message) for w in said] == [
        f"--run {st_a.out_dir}: its run.json's dev metrics were measured on other dev rows (both "
        f"16 rows at max_length {config.max_length}): fruit's dev data changed since it trained; "
        "score it on the dev file it trained on for its own metrics"
    ]


def test_a_fusion_folder_without_its_record_takes_its_adapters_from_adapters(
    config, root, st_a, tmp_path
) -> None:
    """An imported AdapterHub fusion records no folders of the adapters it mixes: evaluate said
    `fusion 'fruit': adapters [...] are not in the model; add each of them (load_adapter of its
    folder)`, a fix for Python only. It takes them from `adapters/<name>/`, as pull lays them
    out, and says which to import there."""
    water = train_task(config, "water", "st-a", root / "st-a-water",
                       train_config=adapter_training(config, "water", **FAST))  # fmt: skip
    adapters = [st_a.out_dir / "adapter", water.out_dir / "adapter"]
    fused = fuse_task(config, "fruit", adapters, tmp_path / "fusion",
                      train_config=fusion_training(config, "fruit", **FAST))  # fmt: skip
    imported = tmp_path / "imported"
    for part in ("fusion", "head"):
        shutil.copytree(fused.out_dir / part, imported / part)
    with pytest.raises(UserError) as caught:
        evaluate_run(config, "fruit", imported)
    assert str(caught.value) == (
        f"--run {imported}: its fusion mixes fruit, water, and the folder holds no adapter folder "
        "of fruit, water (an imported fusion records none); import each into it (adapterfleet "
        f"import-adapter THEIR_DIR --out {imported / 'adapters' / 'fruit'} for each) and evaluate "
        "again"
    )
    for name, folder in zip(("fruit", "water"), adapters, strict=True):
        shutil.copytree(folder, imported / "adapters" / name)
    assert evaluate_run(config, "fruit", imported) == pytest.approx(fused.dev_metrics)


BERT_LAYOUT = {
    "layers": "encoder.layer",
    "attention_output": "attention.output.dropout",
    "attention_norm": "attention.output.LayerNorm",
    "ffn_output": "output.dropout",
    "ffn_norm": "output.LayerNorm",
    "norm": "post",
}


def test_a_run_trained_with_another_layout_is_refused(config, st_a, tmp_path) -> None:
    """A declared layout places the adapters (and on which side of the norm): a run trained
    with another was scored without a word, 0.81 against 0.69 on a user's OPT base."""
    info = json.loads((st_a.out_dir / "run.json").read_text())
    assert info["base_model_layout"] == {}  # the family's built-in one
    declared = dataclasses.replace(
        config, base=dataclasses.replace(config.base, layout=tuple(sorted(BERT_LAYOUT.items())))
    )
    with pytest.raises(UserError) as caught:
        evaluate_run(declared, "fruit", st_a.out_dir)
    message = str(caught.value)
    assert message.startswith(
        f"--run {st_a.out_dir} was trained with another base_model_layout than the config's "
        "(base_model_layout.attention_norm: none → attention.output.LayerNorm, "
    )
    assert message.endswith("its adapters sit where that layout placed them: declare none")
    run = Path(shutil.copytree(st_a.out_dir, tmp_path / "run"))
    pre = {**BERT_LAYOUT, "norm": "pre"}
    (run / "run.json").write_text(json.dumps({**info, "base_model_layout": pre}))
    with pytest.raises(UserError, match=r"\(base_model_layout.norm: pre → post\); .*: declare "
                       "the layout it was trained with"):  # fmt: skip
        evaluate_run(declared, "fruit", run)
    del info["base_model_layout"]  # a run from before the layout was recorded: not judged
    (run / "run.json").write_text(json.dumps(info))
    assert set(evaluate_run(config, "fruit", run)) >= {"accuracy"}


def test_a_run_trained_on_another_named_base_is_refused_before_loading(config, st_a, tmp_path):
    """The config's base would load the run's adapter without a word where both have one shape
    (bert-base-uncased, roberta-base) and evaluate nonsense; refused, with the override."""
    run = Path(shutil.copytree(st_a.out_dir, tmp_path / "run"))
    info = json.loads((run / "run.json").read_text())
    (run / "run.json").write_text(json.dumps({**info, "base_model": "roberta-base"}))
    on_hub = dataclasses.replace(config, base_model="bert-base-uncased")  # never downloaded
    with pytest.raises(UserError) as caught:
        evaluate_run(on_hub, "fruit", run)
    assert str(caught.value) == (
        f"--run {run} was trained on base_model 'roberta-base', the config's is "
        "'bert-base-uncased'; use the base it was trained on: -o base_model=roberta-base"
    )


def test_a_run_trained_on_another_base_folder_is_refused_before_loading(
    config, st_a, tiny_model, tmp_path
):
    """The run's weights loaded from the folder run.json records, its task tokenised with the
    config's base: a Llama's tokens in a BERT run scored 0.5 where the run had scored higher
    (and a BERT's tokens in a Llama run were an IndexError)."""
    from tuning_support import make_tiny_decoder

    other = make_tiny_decoder(tmp_path / "llama")
    for base in (str(other), "minilm-l6"):
        with pytest.raises(UserError) as caught:
            evaluate_run(dataclasses.replace(config, base_model=base), "fruit", st_a.out_dir)
        assert str(caught.value) == (
            f"--run {st_a.out_dir} was trained on base_model '{tiny_model.resolve()}', the "
            f"config's is '{base}'; use the base it was trained on: -o "
            f"base_model={tiny_model.resolve()}"
        )
    with pytest.MonkeyPatch.context() as patch:  # the same folder, named from elsewhere
        patch.chdir(tiny_model.parent)
        relative = dataclasses.replace(config, base_model=tiny_model.name)
        assert evaluate_run(relative, "fruit", st_a.out_dir) == pytest.approx(st_a.dev_metrics)


def test_a_run_that_is_not_a_run_folder_says_so(config, st_a, tmp_path) -> None:
    """A folder that does not exist, or an adapter folder alone (import-adapter's output), was
    reported as a missing head/head_config.json."""
    adapter_only = Path(shutil.copytree(st_a.out_dir / "adapter", tmp_path / "imported"))
    cases = {
        tmp_path / "nope": "does not exist",
        adapter_only: (
            "has no run.json, head/, heads/ or head_config.json: it is not a run folder"
        ),
        adapter_only / "adapter.safetensors": "is a file",
    }
    for run, problem in cases.items():
        with pytest.raises(UserError) as caught:
            evaluate_run(config, "fruit", run)
        assert str(caught.value) == (
            f"--run {run} {problem}; give the --out folder of a train or fuse run, a folder "
            "adapterfleet pull wrote, or one import-adapter wrote with its head (an adapter "
            "folder alone is used with fuse --adapters)"
        )


def test_an_imported_adapter_with_its_head_is_scored_as_the_run_it_came_from(
    config, st_a, tmp_path
) -> None:
    """import-adapter writes an AdapterHub adapter's head beside it, as AdapterHub saves them;
    evaluate refused that folder as no run folder, so an imported head could not be scored.
    Through AdapterHub's layout and back, the run's own dev metrics."""
    from adapterfleet.interop import export_adapterhub, import_adapterhub

    export_adapterhub(st_a.out_dir, tmp_path / "hub")
    imported = import_adapterhub(tmp_path / "hub", tmp_path / "imported", name="fruit")
    assert (imported.adapter, imported.head) == ("fruit", "fruit")
    assert (tmp_path / "imported" / "head_config.json").is_file()
    scored = evaluate_run(config, "fruit", tmp_path / "imported")
    assert scored == pytest.approx(st_a.dev_metrics, abs=1e-6)


def test_a_head_that_does_not_score_the_tasks_labels_is_refused(config, st_a) -> None:
    with pytest.raises(UserError) as caught:
        evaluate_run(config, "fruit4", st_a.out_dir)
    message = str(caught.value)
    assert message.startswith("tasks.fruit4.label_names: ")
    assert f"but the head in {st_a.out_dir / 'head'} scores ['no', 'yes']" in message
    assert message.endswith(
        "evaluate the run on the task it was trained for, with the config it was trained with"
    )
    assert "predict" not in message and "registered" not in message and "\n" not in message


def test_a_fusion_is_evaluated_on_the_base_it_was_trained_on(config, root, mta_fusion) -> None:
    saved = json.loads((root / "fusion" / "run.json").read_text())
    assert saved["base_model"] == str((root / "mta" / "model").resolve())  # not "mta/model"
    assert os.getcwd() != str(root)
    with warnings.catch_warnings():  # the same rows, tokenised by the MT-A base's own tokenizer
        warnings.filterwarnings("error", message=".*other dev rows")
        again = evaluate_run(config, "score", root / "fusion")
    assert set(again) == {"pearson", "spearman", "mse"}
    assert again == pytest.approx(mta_fusion.dev_metrics, rel=1e-5)


def test_train_records_a_base_folder_given_relative_as_absolute(config, tiny_model, tmp_path):
    relative = dataclasses.replace(config, base_model=tiny_model.name)  # "model", from its parent
    training = adapter_training(config, "fruit", **FAST)
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(tiny_model.parent)
        train_task(relative, "fruit", "head", tmp_path / "head", train_config=training)
    saved = json.loads((tmp_path / "head" / "run.json").read_text())
    assert saved["base_model"] == str(tiny_model.resolve())


def test_a_fusion_over_an_adapter_retrained_since_is_refused(config, st_a, tmp_path) -> None:
    water = adapter_training(config, "water", **FAST)
    train_task(config, "water", "st-a", tmp_path / "water", train_config=water)
    adapters = [st_a.out_dir / "adapter", tmp_path / "water" / "adapter"]
    training = fusion_training(config, "fruit", **FAST)
    fusion = fuse_task(config, "fruit", adapters, tmp_path / "fusion", train_config=training)
    assert evaluate_run(config, "fruit", fusion.out_dir) == pytest.approx(fusion.dev_metrics)
    (tmp_path / "water").rename(tmp_path / "moved")  # said only "adapter_config.json is missing"
    beside = fusion.out_dir / "adapters" / "water"
    gone = rf"lineage.adapter_dirs\) is gone; move it back, copy it to {beside}, or fuse again"
    with pytest.raises(UserError, match=gone):
        evaluate_run(config, "fruit", fusion.out_dir)
    # a run folder moved with its adapters copied in: found there, checked by their hashes
    shutil.copytree(tmp_path / "moved" / "adapter", beside)
    assert evaluate_run(config, "fruit", fusion.out_dir) == pytest.approx(fusion.dev_metrics)
    shutil.rmtree(fusion.out_dir / "adapters")
    (tmp_path / "moved").rename(tmp_path / "water")
    again = dataclasses.replace(water, seed=water.seed + 1)
    train_task(config, "water", "st-a", tmp_path / "water", train_config=again)  # in place
    with pytest.raises(UserError) as caught:
        evaluate_run(config, "fruit", fusion.out_dir)
    message = str(caught.value)
    weights = tmp_path / "water" / "adapter" / "adapter.safetensors"
    assert str(weights) in message and str(fusion.out_dir / "run.json") in message
    assert "\n" not in message
    # export named that folder as the adapter the fusion mixes, for AdapterHub to load with it
    out = tmp_path / "exported"
    command = [sys.executable, "-m", "adapterfleet.cli.app", "export", str(fusion.out_dir)]
    command += ["--format", "adapterhub", "--out", str(out)]
    exported = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert exported.returncode == 2, exported.stdout + exported.stderr
    assert exported.stderr.strip() == f"error: {message}" and not out.exists()


@pytest.mark.parametrize("task", ["fruit", "water"])
def test_an_mt_a_run_gives_each_task_its_own_dev_metrics(config, mta, task) -> None:
    recorded = json.loads((mta.out_dir / "run.json").read_text())["lineage"]["task_metrics"]
    again = evaluate_run(config, task, mta.out_dir)
    assert again == pytest.approx(recorded[task])


def test_a_task_the_mt_a_run_did_not_train_is_refused(config, mta) -> None:
    with pytest.raises(UserError) as caught:
        evaluate_run(config, "fruit4", mta.out_dir)
    message = str(caught.value)
    assert message.startswith("--task fruit4: ")
    assert "fruit, water" in message and "\n" not in message
