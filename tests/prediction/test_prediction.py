"""`adapterfleet predict`: a registered fusion (or adapter) with its head over an input file,
checked against the model's logits computed directly, row by row, from the run's own folders."""

from __future__ import annotations

import csv
import json
import math
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from adapterfleet.adapters import (
    AdapterModel,
    load_adapter,
    load_encoder,
    load_head,
    load_tokenizer,
    set_active_adapter,
)
from adapterfleet.config import ConfigError
from adapterfleet.data import TaskError
from adapterfleet.fusion import load_fusion, set_active_fusion
from adapterfleet.orchestration.predict import predict_file
from adapterfleet.registry import RegistryError

ROOT = Path(__file__).resolve().parents[2]
WORDS = [
    "apple",
    "banana",
    "river",
    "lake",
    "car",
    "bus",
    "the",
    "a",
    "small",
    "big",
    "red",
    "blue",
    "rock",
    "sand",
    "plum",
    "boat",
]


def _texts(count: int = 37, seed: int = 0) -> list[str]:
    """Sentences of 1 to 20 words, so length-grouped batches reorder the rows."""
    rng = random.Random(seed)
    return [" ".join(rng.choices(WORDS, k=rng.randint(1, 20))) for _ in range(count)]


def _write_tsv(path: Path, texts: list[str], labels: bool = False) -> Path:
    header = "id\ttext" + ("\tlabel" if labels else "")
    lines = [f"ex{i}\t{t}" + ("\tyes" if labels else "") for i, t in enumerate(texts)]
    path.write_text("\n".join([header, *lines]) + "\n")
    return path


def _write_jsonl(path: Path, texts: list[str]) -> Path:
    path.write_text("".join(json.dumps({"text": t, "note": i}) + "\n" for i, t in enumerate(texts)))
    return path


def _read(path: Path) -> list[dict]:
    if path.suffix == ".csv":
        with path.open(newline="") as handle:
            return list(csv.DictReader(handle))
    return [json.loads(line) for line in path.read_text().splitlines()]


def _fusion_model(world) -> AdapterModel:
    model = AdapterModel(load_encoder(world.config.base_model))
    for adapter_dir in sorted((world.fusion_run / "adapters").iterdir()):
        load_adapter(model, adapter_dir)
    set_active_fusion(model, load_fusion(model, world.fusion_run / "run" / "fusion", name="fruit"))
    model.select_head(load_head(model, world.fusion_run / "run" / "head", name="fruit"))
    return model.eval()


def _adapter_model(world, task: str) -> AdapterModel:
    model = AdapterModel(load_encoder(world.config.base_model))
    set_active_adapter(model, load_adapter(model, world.adapter_runs[task] / "adapter", name=task))
    model.select_head(load_head(model, world.adapter_runs[task] / "head", name=task))
    return model.eval()


@torch.no_grad()
def _direct_probabilities(world, model: AdapterModel, texts: list[str]) -> torch.Tensor:
    """One row at a time, unpadded: softmax of the model's logits."""
    tokenizer = load_tokenizer(world.config.base_model)
    rows = []
    for text in texts:
        enc = tokenizer(text, truncation=True, max_length=world.config.max_length)
        batch = {k: torch.tensor([v]) for k, v in enc.items()}
        rows.append(torch.softmax(model(batch)[0].float(), dim=-1))  # as predict does
    return torch.stack(rows)


def _check(rows: list[dict], expected: torch.Tensor, labels: list[str], ids: bool) -> None:
    assert len(rows) == len(expected)
    for index, (row, probs) in enumerate(zip(rows, expected, strict=True)):
        assert int(row["row"]) == index
        if ids:
            assert row["id"] == f"ex{index}"
        got = [float(row[f"prob_{name}"]) for name in labels]
        assert math.isclose(sum(got), 1.0, abs_tol=1e-5)
        assert got == pytest.approx(probs.tolist(), abs=1e-5)
        assert row["prediction"] == labels[int(probs.argmax())]


def test_fusion_over_tsv_and_jsonl_matches_the_model_row_by_row(world, tmp_path):
    texts = _texts()
    expected = _direct_probabilities(world, _fusion_model(world), texts)
    labels = ["no", "yes"]
    assert len(set(expected.argmax(-1).tolist())) == 2  # both classes occur: the check has teeth

    tsv = _write_tsv(tmp_path / "in.tsv", texts)  # no label column
    summary = predict_file(
        world.config, "fruit", tsv, tmp_path / "out.jsonl", batch_size=4, say=print
    )
    assert summary.rows == len(texts) and summary.version.version == 1
    rows = _read(tmp_path / "out.jsonl")
    assert list(rows[0]) == ["row", "id", "prediction", "prob_no", "prob_yes"]
    _check(rows, expected, labels, ids=True)

    jsonl = _write_jsonl(tmp_path / "in.jsonl", texts)  # no id, no label
    out = str(tmp_path / "out.csv")  # a str from a notebook failed after every row was scored
    predict_file(world.config, "fruit", str(jsonl), out, batch_size=5, say=print)
    rows = _read(tmp_path / "out.csv")
    assert list(rows[0]) == ["row", "prediction", "prob_no", "prob_yes"]
    _check(rows, expected, labels, ids=False)


def test_labels_in_the_input_are_ignored_and_version_can_be_chosen(world, tmp_path):
    texts = _texts(9, seed=1)
    tsv = _write_tsv(tmp_path / "in.tsv", texts, labels=True)
    predict_file(world.config, "fruit", tsv, tmp_path / "a.jsonl", version=1, say=print)
    predict_file(world.config, "fruit", tsv, tmp_path / "b.jsonl", alias="best", say=print)
    assert _read(tmp_path / "a.jsonl") == _read(tmp_path / "b.jsonl")


def test_single_adapter_with_its_head(world, tmp_path):
    texts = _texts(21, seed=2)
    expected = _direct_probabilities(world, _adapter_model(world, "water"), texts)
    tsv = _write_tsv(tmp_path / "in.tsv", texts)
    predict_file(
        world.config, "water", tsv, tmp_path / "out.csv", adapter=True, batch_size=3, say=print
    )
    _check(_read(tmp_path / "out.csv"), expected, ["no", "yes"], ids=True)


def test_a_fusion_trained_in_bf16_predicts_in_bf16(world, tmp_path):
    """`predict` computes in the precision the model was trained and dev-evaluated in
    (`fusion.training.precision`): here bf16, the model's bf16-autocast probabilities."""
    from dataclasses import replace

    texts = _texts(11, seed=4)
    model = _fusion_model(world)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        expected = _direct_probabilities(world, model, texts)
    fp32 = _direct_probabilities(world, model, texts)
    assert (expected - fp32).abs().max() > 1e-4  # the two precisions tell apart
    training = replace(world.config.fusion.training, precision="bf16")
    config = replace(world.config, fusion=replace(world.config.fusion, training=training))
    tsv = _write_tsv(tmp_path / "in.tsv", texts)
    predict_file(config, "fruit", tsv, tmp_path / "out.jsonl", batch_size=1, say=print)
    rows = _read(tmp_path / "out.jsonl")
    got = torch.tensor([[row["prob_no"], row["prob_yes"]] for row in rows])
    torch.testing.assert_close(got, expected, atol=1e-6, rtol=0)


def test_headerless_tsv_with_named_columns(world, tmp_path):
    texts = _texts(5, seed=3)
    path = tmp_path / "in.tsv"
    path.write_text("".join(f"{i}\t{t}\n" for i, t in enumerate(texts)))
    predict_file(
        world.config,
        "water",
        path,
        tmp_path / "out.jsonl",
        adapter=True,
        header=False,
        columns=["idx", "text"],
        say=print,
    )
    rows = _read(tmp_path / "out.jsonl")
    assert [r["id"] for r in rows] == [str(i) for i in range(5)]


@pytest.mark.parametrize(
    ("case", "error", "words"),
    [
        ("unknown target", ConfigError, ["target 'nope'", "tasks there: fruit, water"]),
        (  # `run` never trains it: the message said to run it (before 2026-12-02)
            "no fusion",
            ConfigError,
            ["'water' is not a fusion target of the config (fusion targets: fruit)", "--adapter"],
        ),
        ("no version", RegistryError, ["version 7", "; its versions: v1 (@best); ", "--version"]),
        ("alias and version", ConfigError, ["--alias pruned-1 and --version 1", "give one"]),
        (
            "missing field",
            TaskError,
            [
                "input column 'text'",
                "columns there: id, sentence (its first line); name a header column 'text'",
            ],
        ),
        ("missing file", TaskError, ["file not found", "--input"]),
        ("bad json", TaskError, ["not valid JSON"]),
        (  # pandas' to_json(lines=True) as .json: "Extra data: line 2", and no fix
            "json lines as .json",
            TaskError,
            ["lines.json holds JSON lines (one record a line), not one", "; pass --format jsonl"],
        ),
        (  # the fix said "set input.format: json", a config's key predict has not
            "a json document as .jsonl",
            TaskError,
            ["one.jsonl is one JSON document, not JSON lines", "; pass --format json"],
        ),
        (
            "bad format",
            TaskError,
            ["no format known for in.txt", "pass --format with one of tsv, csv, jsonl"],
        ),
        ("unknown id field", TaskError, ["--id-field: column 'nope'", "columns there: id, text"]),
        ("empty value", TaskError, ["input row 2", "no value for 'text'"]),
        ("blank text", TaskError, ["input row 2", "an empty value for 'text'"]),
        ("columns over a header", TaskError, ["--columns", "pass --no-header with --columns"]),
        ("a list as text", TaskError, ["input column 'text': holds a list (['a', 'b'])"]),
        ("bad suffix", ConfigError, ["--out", "'.txt'", ".jsonl, .ndjson, .csv, .tsv, .parquet"]),
    ],
)
def test_errors_are_one_line_naming_the_field_and_the_fix(world, tmp_path, case, error, words):
    good = _write_tsv(tmp_path / "in.tsv", _texts(3))
    target, path, out, options = "fruit", good, tmp_path / "out.jsonl", {}
    if case == "unknown target":
        target = "nope"
    elif case == "no fusion":
        target = "water"
    elif case == "no version":
        options = {"version": 7}
    elif case == "alias and version":  # the alias was dropped without a word
        options = {"alias": "pruned-1", "version": 1}
    elif case == "missing field":
        path = tmp_path / "other.tsv"
        path.write_text("id\tsentence\n1\tapple\n")
    elif case == "missing file":
        path = tmp_path / "absent.tsv"
    elif case == "bad json":
        path = tmp_path / "bad.json"
        path.write_text("{not json")
    elif case == "json lines as .json":
        path = tmp_path / "lines.json"
        path.write_text('{"text": "apple"}\n{"text": "pear"}\n')
    elif case == "a json document as .jsonl":
        path = tmp_path / "one.jsonl"
        path.write_text('[{"text": "apple"}, {"text": "pear"}]')
    elif case == "bad format":
        path = tmp_path / "in.txt"
        path.write_text("text\napple\n")
    elif case == "empty value":
        path = tmp_path / "gap.jsonl"
        path.write_text('{"text": "apple"}\n{"text": null}\n')
    elif case == "blank text":
        path = tmp_path / "gap.jsonl"
        path.write_text('{"text": "apple"}\n{"text": "  "}\n')
    elif case == "unknown id field":
        options = {"id_field": "nope"}
    elif case == "columns over a header":  # the header line would be predicted as a row
        options = {"columns": ["id", "text"]}
    elif case == "a list as text":
        path = tmp_path / "list.jsonl"
        path.write_text('{"text": ["a", "b"]}\n')
    elif case == "bad suffix":
        out = tmp_path / "out.txt"
    with pytest.raises(error) as raised:
        predict_file(world.config, target, path, out, say=print, **options)
    message = str(raised.value)
    assert "\n" not in message
    for word in words:
        assert word in message
    assert not out.exists()


def test_a_version_trained_on_another_named_base_is_refused_before_any_pull(world, tmp_path):
    from dataclasses import replace

    from mlflow import MlflowClient

    client, name = MlflowClient(world.uri), "tinysweep.fusion.fruit"
    version = client.get_model_version_by_alias(name, "best")
    source = _write_tsv(tmp_path / "in.tsv", _texts(2))
    on_hub = replace(world.config, base_model="bert-base-uncased")  # never downloaded
    client.set_model_version_tag(name, version.version, "base_model", "roberta-base")
    try:
        with pytest.raises(ConfigError) as raised:
            predict_file(on_hub, "fruit", source, tmp_path / "out.jsonl", say=print)
    finally:
        client.set_model_version_tag(name, version.version, "base_model", world.config.base_model)
    assert str(raised.value) == (
        f"{name} v{version.version} was trained on base_model 'roberta-base', the config's is "
        "'bert-base-uncased'; use the base it was trained on: -o base_model=roberta-base"
    )
    assert not (tmp_path / "out.jsonl").exists()


def test_a_version_trained_with_another_layout_is_refused_before_any_pull(world, tmp_path):
    """A declared `base_model_layout` places the adapters: predicting with another one scored
    a user's dev set at 0.69 against the 0.81 it was trained to, without a word."""
    from dataclasses import replace

    from mlflow import MlflowClient

    client, name = MlflowClient(world.uri), "tinysweep.fusion.fruit"
    version = client.get_model_version_by_alias(name, "best")
    assert version.tags["base_model_layout"] == "built-in"
    source = _write_tsv(tmp_path / "in.tsv", _texts(2))
    layout = (("layers", "encoder.layer"), ("norm", "pre"))
    declared = replace(world.config, base=replace(world.config.base, layout=layout))
    with pytest.raises(ConfigError) as raised:
        predict_file(declared, "fruit", source, tmp_path / "out.jsonl", say=print)
    assert str(raised.value) == (
        f"{name} v{version.version} was trained with another base_model_layout than the "
        "config's (base_model_layout.layers: none → encoder.layer, base_model_layout.norm: none "
        "→ pre); its adapters sit where that layout placed them: declare none"
    )
    assert not (tmp_path / "out.jsonl").exists()


def test_a_version_whose_weights_do_not_fit_the_base_names_the_version(world, tmp_path):
    """A version recorded on a hub id, predicted with a local folder of another family: the
    names cannot be compared, so the weights' own check refused it, naming the temporary
    folder it was pulled into. The line names the version and the base it records."""
    from dataclasses import replace

    from mlflow import MlflowClient
    from tuning_support import make_tiny_decoder

    client, name = MlflowClient(world.uri), "tinysweep.fusion.fruit"
    version = client.get_model_version_by_alias(name, "best")
    source = _write_tsv(tmp_path / "in.tsv", _texts(2))
    llama = replace(world.config, base_model=str(make_tiny_decoder(tmp_path / "llama")))
    client.set_model_version_tag(name, version.version, "base_model", "some-org/bert-tiny")
    try:
        with pytest.raises(ConfigError) as raised:
            predict_file(llama, "fruit", source, tmp_path / "out.jsonl", say=print)
    finally:
        client.set_model_version_tag(name, version.version, "base_model", world.config.base_model)
    assert str(raised.value) == (
        f"{name} v{version.version} was trained on another base (model_type='bert', this "
        "base's 'llama'; base_model 'some-org/bert-tiny'), not the config's "
        f"{llama.base_model!r}; use -o base_model=some-org/bert-tiny, or a version trained on "
        "this base (--version N; adapterfleet adapters --all lists them)"
    )
    assert not (tmp_path / "out.jsonl").exists()


def test_an_output_that_is_the_input_or_a_folder_is_refused_before_any_work(world, tmp_path):
    """Writing onto the input lost the rows; a folder failed only after every row was
    predicted. Both are refused first: nothing is read, pulled or written."""
    source = _write_jsonl(tmp_path / "in.jsonl", _texts(3))
    before = source.read_bytes()
    with pytest.raises(ConfigError, match=r"--out: .*in.jsonl is the --input file, .*another"):
        predict_file(world.config, "fruit", source, tmp_path / "." / "in.jsonl", say=print)
    assert source.read_bytes() == before
    (tmp_path / "out.csv").mkdir()
    with pytest.raises(ConfigError, match=r"--out: .*out.csv is a folder; give a file name"):
        predict_file(world.config, "fruit", source, tmp_path / "out.csv", say=print)
    # a folder that takes no file (a tester's /proc/p.csv failed after 61 s of predicting,
    # in a traceback); one under a file; nothing made on the way
    for out in (Path("/proc/p.csv"), tmp_path / "in.jsonl" / "deeper" / "p.csv"):
        with pytest.raises(ConfigError, match=rf"--out: {out} cannot be written \(.+\); give"):
            predict_file(world.config, "fruit", source, out, say=print)
    # a good run writes the whole file at once, with no partial file left beside it
    predict_file(world.config, "fruit", source, tmp_path / "p.jsonl", say=print)
    assert len(_read(tmp_path / "p.jsonl")) == 3
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl", "out.csv", "p.jsonl"]


def test_ray_data_gives_the_same_output_as_the_local_path(world, tmp_path, ray_local):
    texts = _texts(53, seed=4)
    tsv = _write_tsv(tmp_path / "in.tsv", texts)
    predict_file(world.config, "fruit", tsv, tmp_path / "local.jsonl", batch_size=4, say=print)
    predict_file(
        world.config,
        "fruit",
        tsv,
        tmp_path / "ray.jsonl",
        batch_size=4,
        use_ray=True,
        workers=2,
        say=print,
    )
    local, on_ray = _read(tmp_path / "local.jsonl"), _read(tmp_path / "ray.jsonl")
    assert [(r["row"], r["id"], r["prediction"]) for r in on_ray] == [
        (r["row"], r["id"], r["prediction"]) for r in local
    ]
    for a, b in zip(local, on_ray, strict=True):
        assert [a["prob_no"], a["prob_yes"]] == pytest.approx(
            [b["prob_no"], b["prob_yes"]], abs=1e-6
        )


@pytest.mark.parametrize("on_ray", [False, True])
def test_off_a_terminal_predict_says_the_rows_done_as_it_goes(
    world, tmp_path, monkeypatch, on_ray, request
):
    """A nightly job's log had no line between `predict x: ... 20000 rows of in.csv` and
    `wrote ...` for 160 s. Off a terminal a line says the rows done every PROGRESS_PERIOD_S
    (here 0: after every batch, the last left to the closing line)."""
    from dataclasses import replace

    from adapterfleet.orchestration import predict

    if on_ray:
        request.getfixturevalue("ray_local")
    monkeypatch.setattr(predict, "PROGRESS_PERIOD_S", 0.0)
    total = 600 if on_ray else 21  # Ray Data returns blocks of RAY_BATCH_ROWS (256)
    tsv = _write_tsv(tmp_path / "in.tsv", _texts(total, seed=6))
    config = replace(world.config, max_length=12)  # some of the rows are cut
    lines: list[str] = []
    options = {"use_ray": True, "workers": 1} if on_ray else {}
    predict_file(
        config, "fruit", tsv, tmp_path / "o.csv", batch_size=4, say=lines.append, **options
    )
    counts = [line for line in lines if f" of {total} rows, " in line]
    assert counts and lines[-1].startswith(f"predict fruit: wrote {total} rows"), lines
    done = [int(line.split(": ")[1].split(" of ")[0]) for line in counts]
    assert done == sorted(done) and done[-1] < total, lines
    assert all(line.startswith("predict fruit: ") and line.endswith(" s") for line in counts)
    if not on_ray:
        assert done == [4, 8, 12, 16, 20]

    # rows that reach max_length are counted, as training's task line counts its own
    from adapterfleet.adapters import load_tokenizer

    tokenizer, most = load_tokenizer(config.base_model), config.max_length
    texts = [line.split("\t")[1] for line in tsv.read_text().splitlines()[1:]]
    lengths = [len(tokenizer(t, truncation=True, max_length=most)["input_ids"]) for t in texts]
    cut = sum(n >= most for n in lengths)
    assert 0 < cut < total  # the check has teeth
    said = f"predict fruit: {cut:,} of {total:,} rows were cut at max_length {most} tokens, as "
    assert sum(line.startswith(said) for line in lines) == 1, lines

    lines.clear()  # a run shorter than the period says no count of rows done (an hour here:
    monkeypatch.setattr(predict, "PROGRESS_PERIOD_S", 3600.0)  # 30 s ran out once on a busy CI)
    predict_file(config, "fruit", tsv, tmp_path / "p.csv", say=lines.append, **options)
    assert len(lines) == 3 and lines[1].startswith(said), lines


def _predict_cli(world, *args: str | Path) -> subprocess.CompletedProcess[str]:
    """`adapterfleet predict fruit -c CONFIG ARGS` in a process of its own."""
    command = [sys.executable, "-m", "adapterfleet.cli.app", "predict", "fruit"]
    command += ["-c", str(world.config_path), *map(str, args)]
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)


def test_cli_predict_in_a_subprocess(world, tmp_path):
    texts = _texts(6, seed=5)
    tsv = _write_tsv(tmp_path / "in.tsv", texts)
    done = _predict_cli(world, "--input", tsv, "--out", tmp_path / "out.csv")
    assert done.returncode == 0, done.stderr
    rows = _read(tmp_path / "out.csv")
    assert [r["id"] for r in rows] == [f"ex{i}" for i in range(6)]
    assert {r["prediction"] for r in rows} <= {"no", "yes"}

    failed = _predict_cli(world, "--input", tsv, "--out", tmp_path / "out.xlsx")
    assert failed.returncode == 2
    assert failed.stderr.strip().startswith("error: --out: unknown suffix '.xlsx'")
    assert ".tsv, .parquet" in failed.stderr and "Traceback" not in failed.stderr


def test_predictions_are_written_as_tsv_and_parquet_as_they_are_read(world, tmp_path):
    """`--out` took .jsonl and .csv only, though `--input` reads TSV and Parquet: each now
    writes the same rows as the CSV, read back as a task's split would be."""
    import pyarrow.parquet as pq

    tsv = _write_tsv(tmp_path / "in.tsv", _texts(5, seed=3))
    for suffix in ("csv", "tsv", "parquet"):
        predict_file(world.config, "fruit", tsv, tmp_path / f"p.{suffix}", say=lambda _: None)
    expected = _read(tmp_path / "p.csv")
    with (tmp_path / "p.tsv").open(encoding="utf-8", newline="") as handle:
        assert list(csv.DictReader(handle, delimiter="\t")) == expected
    table = pq.read_table(tmp_path / "p.parquet").to_pylist()
    assert [{k: str(v) for k, v in row.items()} for row in table] == expected
    assert isinstance(table[0]["prob_yes"], float) and table[0]["id"] == "ex0"


def test_cli_predict_encoding_reads_a_latin1_input_as_its_utf8_twin(world, tmp_path):
    """A Latin-1 export was refused (`save it as UTF-8`) with no option to read it as it is;
    `--encoding latin-1` gives the predictions of the same rows saved as UTF-8."""
    texts = [f"{text} caf\u00e9 na\u00efve" for text in _texts(5, seed=9)]
    lines = ["id\ttext", *(f"ex{i}\t{t}" for i, t in enumerate(texts))]
    (tmp_path / "latin1.tsv").write_bytes(("\n".join(lines) + "\n").encode("latin-1"))
    utf8 = _write_tsv(tmp_path / "utf8.tsv", texts)
    given = ("--input", tmp_path / "latin1.tsv")
    refused = _predict_cli(world, *given, "--out", tmp_path / "refused.csv")
    assert refused.returncode == 2 and "pass --encoding" in refused.stderr, refused.stderr
    done = _predict_cli(world, *given, "--encoding", "latin-1", "--out", tmp_path / "out.csv")
    assert done.returncode == 0, done.stderr
    predict_file(world.config, "fruit", utf8, tmp_path / "twin.csv", say=lambda _: None)
    assert _read(tmp_path / "out.csv") == _read(tmp_path / "twin.csv")


def test_cli_predict_on_ray_prints_our_lines_not_rays(world, tmp_path):
    """`predict --ray` printed some fifty lines of Ray and Ray Data (INFO lines, a progress
    report every ten seconds, the token-authentication WARNING) around its own two. What Ray
    says below a warning now stays in its log files, as in `run`. (One line of Ray Data's own
    actor pool, `core_worker.cc: Actor ... has constructor arguments in the object store`, is
    printed by Ray's C++ core on every Ray Data actor pool: ray-project/ray#57733.)"""
    tsv = _write_tsv(tmp_path / "in.tsv", _texts(5, seed=6))
    command = [sys.executable, "-m", "adapterfleet.cli.app", "predict", "fruit", "--ray"]
    command += ["-c", str(world.config_path), "--input", str(tsv), "--workers", "1"]
    done = subprocess.run(
        [*command, "--out", str(tmp_path / "out.csv")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        env={k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"},  # a Ray of its own
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert len(_read(tmp_path / "out.csv")) == 5
    lines = (done.stdout + done.stderr).splitlines()
    ours = [line for line in lines if line.startswith("predict fruit: ")]
    assert len(ours) == 2, lines
    theirs = [line for line in lines if line not in ours and "core_worker.cc" not in line]
    assert theirs == [], theirs


def test_sigterm_to_predict_is_one_line_and_keeps_the_output_file(world, tmp_path):
    """A nightly job stopped by SIGTERM: `predict` exited 143 without a word (with --ray, Ray's
    stack dump and an abort). Now it says so in one line, as `run` does; the file at --out is
    as it was. Stopped while it waits on standard input, which is held open."""
    out = tmp_path / "out.csv"
    out.write_text("yesterday's predictions\n")
    command = [sys.executable, "-m", "adapterfleet.cli.app", "predict", "fruit"]
    command += ["-c", str(world.config_path), "--input", "-", "--format", "tsv", "--out", str(out)]
    waiting = subprocess.Popen(
        command, stdin=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )
    try:
        waiting.stdin.write("sentence\tlabel\n")
        waiting.stdin.flush()
        time.sleep(8)  # the CLI is up and reading; nothing ends the input
        waiting.send_signal(signal.SIGTERM)
        _, stderr = waiting.communicate(timeout=60)
    finally:
        waiting.kill()
    assert waiting.returncode == 143, stderr[-3000:]
    assert stderr.strip().splitlines()[-1] == (
        f"interrupted by SIGTERM: nothing was written to {out} (a file there is as it was); "
        "run it again"
    ), stderr[-3000:]
    assert out.read_text() == "yesterday's predictions\n"
    assert [p.name for p in tmp_path.iterdir()] == ["out.csv"]  # no partial file beside it


def test_cli_predict_reads_standard_input_with_its_format(world, tmp_path):
    """`--input -` (and a pipe such as /dev/stdin) was `file not found`: the rows are now read
    from standard input, which has no suffix, so --format is asked for."""
    tsv = _write_tsv(tmp_path / "in.tsv", _texts(4, seed=7))
    command = [sys.executable, "-m", "adapterfleet.cli.app", "predict", "fruit"]
    command += ["-c", str(world.config_path), "--input", "-"]
    piped = subprocess.run(
        [*command, "--format", "tsv", "--out", str(tmp_path / "out.csv")],
        input=tsv.read_text(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert piped.returncode == 0, piped.stderr[-3000:]
    assert "4 rows of standard input" in piped.stderr
    from_file = predict_file(world.config, "fruit", tsv, tmp_path / "file.csv", say=print)
    assert from_file.rows == 4
    assert _read(tmp_path / "out.csv") == _read(tmp_path / "file.csv")
    # and out again: `--out -` writes JSON lines to standard output, the lines of progress
    # going to standard error (a pipe of stdin to stdout was impossible)
    both = subprocess.run(
        [*command, "--format", "tsv", "--out", "-"],
        input=tsv.read_text(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert both.returncode == 0, both.stderr[-3000:]
    assert "wrote 4 rows to standard output" in both.stderr
    predict_file(world.config, "fruit", tsv, tmp_path / "file.jsonl", say=print)
    lines = [json.loads(line) for line in both.stdout.splitlines()]
    assert lines == _read(tmp_path / "file.jsonl")
    unsaid = subprocess.run(
        [*command, "--out", str(tmp_path / "no.csv")],
        input=tsv.read_text(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert unsaid.returncode == 2
    assert "standard input has no suffix to tell its format; pass --format" in unsaid.stderr


def test_predict_from_python_on_a_store_not_there_creates_none(world, tmp_path):
    """From Python, predict_file on a SQLite store that was not there created an empty one
    (and MLflow's `Creating initial MLflow database tables...`) before saying nothing was
    registered; it is refused first, as the CLI refused it."""
    import dataclasses

    from adapterfleet.registry import RegistryError

    store = tmp_path / "elsewhere" / "mlflow.db"
    config = dataclasses.replace(world.config, tracking_uri=f"sqlite:///{store}")
    tsv = _write_tsv(tmp_path / "in.tsv", _texts(3))
    with pytest.raises(RegistryError, match="no tracking store at"):
        predict_file(config, "fruit", tsv, tmp_path / "out.csv", say=lambda _: None)
    assert not store.exists() and not (tmp_path / "out.csv").exists()
