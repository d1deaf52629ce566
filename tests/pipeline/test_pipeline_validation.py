"""`adapterfleet run` refuses a bad pipeline before any trial is scheduled: one line naming the
field and the fix, exit 2, and no tracking store or experiment created.

The cases that pass options (a Ray address, --num-cpus) run the console command in a process of
its own, as a user does; the others run the same command in this process (Typer's runner), so
that the ~5 s of importing torch, Ray and MLflow is paid once, not once per case."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from tuning_support import config_document, write_config
from typer.testing import CliRunner

from adapterfleet.cli.app import app

ROOT = Path(__file__).resolve().parents[2]


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])  # free again once the socket closes


def run_cli(config: Path, *args: str) -> tuple[int, str, str]:
    """`adapterfleet run CONFIG ARGS` in a process of its own: exit status, stdout, stderr."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "MLFLOW_DISABLE_TELEMETRY": "true"}
    env.pop("RAY_ADDRESS", None)
    env.pop("MLFLOW_TRACKING_URI", None)
    result = subprocess.run(
        [sys.executable, "-m", "adapterfleet.cli.app", "run", str(config), *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=300,
    )
    return result.returncode, result.stdout, result.stderr


def run_here(config: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[int, str, str]:
    """The same command in this process. A Ray an earlier test left running here makes it skip
    the check of a local node before Ray starts: the cases with options, which need that check,
    run in processes of their own."""
    for name in ("RAY_ADDRESS", "MLFLOW_TRACKING_URI"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(ROOT)
    result = CliRunner().invoke(app, ["run", str(config)])
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(
        result.exception
    )
    return result.exit_code, result.stdout, result.stderr


def _unknown_target(doc: dict[str, Any]) -> None:
    doc["fusion"] = {"targets": {"fruit": ["fruit", "ghost"]}}


def _unknown_adapter_task(doc: dict[str, Any]) -> None:
    doc["adapters"]["tasks"] = ["fruit", "ghost"]


def _zero_bottleneck(doc: dict[str, Any]) -> None:
    doc["adapters"]["reduction_factors"] = [4, 64]  # the tiny model's hidden size is 32


def _zero_bottleneck_in_a_task_grid(doc: dict[str, Any]) -> None:
    doc["adapters"]["task_grid"] = {"water": {"reduction_factors": [64]}}


def _tracking_unreachable(doc: dict[str, Any]) -> None:
    doc["tracking_uri"] = f"http://127.0.0.1:{closed_port()}"


def _unknown_base_model(doc: dict[str, Any]) -> None:
    doc["base_model"] = "no-such-org/no-such-model"


def _weights_gone(doc: dict[str, Any]) -> None:
    """A base model folder whose weights were never saved (config and tokenizer only)."""
    model = Path(doc["base_model"])
    bare = Path(doc["storage"]).parent / "no-weights"
    shutil.copytree(model, bare, ignore=shutil.ignore_patterns("*.safetensors"))
    doc["base_model"] = str(bare)


def _missing_data_file(doc: dict[str, Any]) -> None:
    doc["tasks"]["water"]["dev"] = "water_dev_missing.tsv"


def _regression_labels_are_words(doc: dict[str, Any]) -> None:
    doc["tasks"]["water"]["type"] = "regression"  # its labels are "yes" and "no"
    del doc["tasks"]["water"]["label_names"]


def _regression_range_decreasing(doc: dict[str, Any]) -> None:
    _regression_labels_are_words(doc)
    doc["tasks"]["water"]["range"] = [5, 0]


def _missing_choice_column(doc: dict[str, Any]) -> None:
    record = {
        "q": "Where is milk kept?",
        "choices": {"label": ["A", "B"], "text": ["fridge", "sky"]},
    }
    (Path(doc["data_root"]) / "quiz.jsonl").write_text(json.dumps({**record, "answerKey": "A"}))
    doc["tasks"]["quiz"] = {
        "type": "multiple_choice",
        "train": "quiz.jsonl",
        "dev": "quiz.jsonl",
        "choices": {"context": ["q"], "list": "choices.txt", "labels": "choices.label"},
        "label_field": "answerKey",
        "label_names": ["A", "B"],
    }


def _no_vocabulary(doc: dict[str, Any]) -> None:
    """A base model folder whose tokenizer lost its vocabulary (config files only)."""
    model = Path(doc["base_model"])
    bare = Path(doc["storage"]).parent / "no-vocab"
    bare.mkdir()
    for name in ("config.json", "model.safetensors", "tokenizer_config.json"):
        shutil.copy(model / name, bare / name)
    doc["base_model"] = str(bare)


def _llama_without_tokenizer(doc: dict[str, Any]) -> None:
    """A Llama folder of config and weights only: its tokenizer fails to load (transformers
    finds no tokenizer.json or tokenizer.model to build it from), where a BERT one loads empty."""
    from transformers import LlamaConfig, LlamaModel

    folder = Path(doc["storage"]).parent / "no-tokenizer-llama"
    config = LlamaConfig(
        vocab_size=100, hidden_size=32, num_hidden_layers=1, num_attention_heads=4,
        num_key_value_heads=2, intermediate_size=64, max_position_embeddings=64,
    )  # fmt: skip
    LlamaModel(config).save_pretrained(folder)
    doc["base_model"] = str(folder)


def _use_base(doc: dict[str, Any], model: Any, folder: Path) -> None:
    """`model` saved in `folder` with the config's tokenizer beside it, as the base model."""
    model.save_pretrained(folder)
    for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt"):
        if (Path(doc["base_model"]) / name).is_file():
            shutil.copy(Path(doc["base_model"]) / name, folder / name)
    doc["base_model"] = str(folder)


def _unknown_family(doc: dict[str, Any]) -> None:
    """A saved OPT: a family with no built-in layout, and none declared."""
    from transformers import OPTConfig, OPTModel

    folder = Path(doc["storage"]).parent / "opt"
    config = OPTConfig(
        hidden_size=32, num_hidden_layers=1, ffn_dim=64, num_attention_heads=4,
        vocab_size=30522, word_embed_proj_dim=32, max_position_embeddings=64,
    )  # fmt: skip
    _use_base(doc, OPTModel(config), folder)


def _neox_pooling_its_first_token(doc: dict[str, Any], where: str) -> None:
    """A saved GPT-NeoX (no built-in layout: declared) whose head pools its first token, by
    the layout's `pooling` or a task's: it trained at the majority class without a word."""
    from transformers import GPTNeoXConfig, GPTNeoXModel

    folder = Path(doc["storage"]).parent / "neox"
    config = GPTNeoXConfig(
        hidden_size=32, num_hidden_layers=1, num_attention_heads=4, intermediate_size=64,
        vocab_size=30522, max_position_embeddings=64, use_parallel_residual=False,
    )  # fmt: skip
    _use_base(doc, GPTNeoXModel(config), folder)
    doc["base_model_layout"] = {
        "layers": "layers", "attention_output": "attention", "attention_norm": "input_layernorm",
        "ffn_output": "mlp", "ffn_norm": "post_attention_layernorm", "norm": "pre",
    }  # fmt: skip
    if where == "layout":
        doc["base_model_layout"]["pooling"] = "cls"
    else:
        doc["tasks"]["water"]["pooling"] = "cls"


def _declared_layout_with_a_wrong_path(doc: dict[str, Any]) -> None:
    doc["base_model_layout"] = {
        "layers": "encoder.layer",
        "attention_output": "attention.output.dropout",
        "attention_norm": "attention.output.LayerNorm",
        "ffn_output": "output.dropout",
        "ffn_norm": "output.layer_norm",
        "norm": "post",
    }


def _numbers_as_text(doc: dict[str, Any]) -> None:
    records = [{"text": i, "label": ["no", "yes"][i % 2]} for i in range(8)]
    lines = [json.dumps(r) for r in records]
    (Path(doc["data_root"]) / "numbers.jsonl").write_text("\n".join(lines) + "\n")
    doc["tasks"]["water"]["train"] = "numbers.jsonl"


def _edit_water_train(doc: dict[str, Any], edit: Callable[[list[str]], list[str]]) -> None:
    path = Path(doc["data_root"]) / "water_train.tsv"
    header, *rows = path.read_text().splitlines()
    path.write_text("\n".join([header, *edit(rows)]) + "\n")


def _one_label(doc: dict[str, Any]) -> None:
    _edit_water_train(doc, lambda rows: [row for row in rows if row.endswith("\tyes")])


def _mostly_malformed(doc: dict[str, Any]) -> None:
    """A comma where the tab should be, in 3 rows of 4: each is one field, not two."""

    def commas(rows: list[str]) -> list[str]:
        return [row.replace("\t", ",") if i % 4 else row for i, row in enumerate(rows)]

    _edit_water_train(doc, commas)


def _bad_labels_in_a_baseline_task(doc: dict[str, Any]) -> None:
    """A third task that only the baselines train, with a label its label_names lack."""
    rows = [f"row {i}\t{['no', 'yes', 'maybe'][i % 3]}" for i in range(12)]
    (Path(doc["data_root"]) / "extra.tsv").write_text("text\tlabel\n" + "\n".join(rows) + "\n")
    doc["tasks"]["extra"] = {**doc["tasks"]["water"], "train": "extra.tsv", "dev": "extra.tsv"}
    doc["adapters"]["tasks"] = ["fruit", "water"]
    doc["baselines"] = {"systems": ["head"], "tasks": ["extra"]}


def _cuda_without_gpu(doc: dict[str, Any]) -> None:
    doc["adapters"]["training"]["device"] = "cuda"


def _base_copy(doc: dict[str, Any], name: str) -> Path:
    """A copy of the config's base model folder, made the config's base."""
    folder = Path(doc["storage"]).parent / name
    shutil.copytree(doc["base_model"], folder)
    doc["base_model"] = str(folder)
    return folder


def _vocabulary_beyond_the_embedding(doc: dict[str, Any]) -> None:
    """The MiniLM tokenizer (30522 ids) beside weights of 100 rows: an IndexError in the first
    step (in `run`, each trial's, retried by Ray)."""
    from transformers import BertConfig, BertModel

    folder = _base_copy(doc, "vocab-100")
    config = BertConfig.from_pretrained(folder)
    config.vocab_size = 100
    BertModel(config).save_pretrained(folder)


def _pickle_holding_more_than_tensors(doc: dict[str, Any]) -> None:
    import pathlib

    import torch
    from safetensors.torch import load_file

    folder = _base_copy(doc, "pickled")
    tensors = load_file(folder / "model.safetensors")
    (folder / "model.safetensors").unlink()
    torch.save({**tensors, "origin": pathlib.PurePosixPath("x")}, folder / "pytorch_model.bin")


def _weights_cut_short(doc: dict[str, Any]) -> None:
    weights = _base_copy(doc, "cut") / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:20000])


def _config_of_another_depth(doc: dict[str, Any]) -> None:
    """config.json says 3 layers, the weights hold 2: the third was random, and trained on."""
    config = _base_copy(doc, "deeper") / "config.json"
    config.write_text(json.dumps({**json.loads(config.read_text()), "num_hidden_layers": 3}))


def _encoder_decoder_with_a_layout(doc: dict[str, Any]) -> None:
    """A T5 with a declared layout of its encoder: it passed, then failed in the first step."""
    from transformers import T5Config, T5Model

    tokenizer = Path(doc["base_model"])
    folder = Path(doc["storage"]).parent / "t5"
    config = T5Config(d_model=32, d_ff=64, num_layers=2, num_heads=2, d_kv=16, vocab_size=30522)
    T5Model(config).save_pretrained(folder)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(tokenizer / name, folder / name)
    doc["base_model"] = str(folder)
    doc["base_model_layout"] = {
        "layers": "encoder.block",
        "attention_output": "layer.0.SelfAttention.o",
        "attention_norm": "layer.0.layer_norm",
        "ffn_output": "layer.1.DenseReluDense",
        "ffn_norm": "layer.1.layer_norm",
        "norm": "pre",
        "pooling": "mean",
    }


CASES = {
    "a regression label that is not a number": (
        _regression_labels_are_words,
        (),
        r"task 'water', train 'label': '(yes|no)' is not a number \(record 1 of .*water_train"
        r"\.tsv\); a regression label is a number",
    ),
    "a range that is not two increasing numbers": (
        _regression_range_decreasing,
        (),
        r"task 'water', range: expected two increasing numbers \[low, high\], got \[5, 0\]",
    ),
    "a declared decoder layout pooling the first token": (
        lambda doc: _neox_pooling_its_first_token(doc, "layout"),
        (),
        r"base_model_layout.pooling: cls pools the first token, which in a decoder \(gpt_neox\)",
    ),
    "a task pooling the first token of a declared decoder": (
        lambda doc: _neox_pooling_its_first_token(doc, "task"),
        (),
        r"task 'water', pooling: cls pools the first token, which in a decoder \(gpt_neox\)",
    ),
    "a metric that does not fit the task type": (
        lambda doc: doc["adapters"]["training"].update(metric="pearson"),
        (),
        r"adapters.training.metric: task '(fruit|water)': 'pearson' does not fit a "
        r"classification task; metrics for classification tasks: accuracy, f1, ",
    ),
    "fusion names an undeclared task": (_unknown_target, (), r"fusion.targets.fruit.*ghost"),
    "adapters.tasks names an undeclared task": (
        _unknown_adapter_task,
        (),
        r"adapters.tasks.*ghost",
    ),
    "reduction factor leaves no bottleneck": (_zero_bottleneck, (), r"adapters.reduction_factors"),
    "a task's reduction factor leaves no bottleneck": (
        _zero_bottleneck_in_a_task_grid,
        (),
        r"adapters.task_grid.water.reduction_factors: .*64",
    ),
    "tracking URI unreachable": (_tracking_unreachable, (), r"tracking URI http://127.0.0.1:\d+"),
    "unknown base model": (_unknown_base_model, (), r"base_model: cannot load 'no-such-org"),
    "missing data file": (_missing_data_file, (), r"water.*water_dev_missing.tsv"),
    "a choice column that does not exist": (
        _missing_choice_column,
        (),
        r"task 'quiz', train column 'choices.txt' \(choices.list\): .* has no 'txt' "
        r"\(it holds label, text\); fix choices.list",
    ),
    "ray address unreachable": (
        lambda doc: None,
        ("--address", "127.0.0.1:{closed_port}"),  # a port picked as the test starts
        r"ray address '127.0.0.1:\d+': nothing answers .*ray start --head",
    ),
    "a dashboard's address given to run": (
        lambda doc: None,
        ("--address", "http://127.0.0.1:8265"),
        r"ray address 'http://127.0.0.1:8265': that is a dashboard's address, where "
        r"`adapterfleet submit` sends jobs; to join the cluster give its GCS address host:port",
    ),
    "resources no node has": (
        lambda doc: doc.update(resources={"cpu": 64}),
        ("--num-cpus", "2"),
        r"resources: a trial needs cpu=64.*no node can provide",
    ),
    # issue #23: trials of several workers, refused before a GPU or CPU is reserved
    "workers no placement can satisfy": (
        lambda doc: doc.update(resources={"cpu": 1, "workers": 3}),
        ("--num-cpus", "2"),
        r"resources.workers: 3 workers of cpu=1, gpu=0 each, but the nodes can place only 2 "
        r"at once .*lower workers",
    ),
    "several GPUs per trial without workers": (
        lambda doc: doc.update(resources={"cpu": 1, "gpu": 2}),
        (),
        r"resources.gpu: 2 GPUs per trial, but a process trains on one device; for a trial on "
        r"2 GPUs set workers: 2 and gpu: 1",
    ),
    "nccl asked for on CPU": (
        lambda doc: doc.update(resources={"cpu": 1, "workers": 2, "backend": "nccl"}),
        (),
        r"resources.backend: nccl runs on GPUs only, and resources.gpu is 0; use backend: gloo",
    ),
    "asha with workers": (
        lambda doc: (
            doc.update(resources={"cpu": 1, "workers": 2}),
            doc["adapters"].update(scheduler="asha"),
        ),
        (),
        r"adapters.scheduler: asha cannot stop a trial of resources.workers: 2",
    ),
    "CUDA graphs with workers": (
        lambda doc: (
            doc.update(resources={"cpu": 1, "workers": 2}),
            doc["adapters"]["training"].update(cuda_graphs=True, device="cuda"),
        ),
        (),
        r"adapters.training.cuda_graphs: true captures one process's training step, and "
        r"resources.workers: 2 trains each trial data-parallel; use cuda_graphs: false",
    ),
    "CUDA graphs with no GPU for the trials": (
        lambda doc: doc["adapters"]["training"].update(cuda_graphs=True, device="auto"),
        (),
        r"adapters.training.cuda_graphs: true, but resources.gpu is 0, so Ray gives no trial a "
        r"GPU; set resources.gpu \(e.g. 1, or 0.25 to share one\) or cuda_graphs: false",
    ),
    "CUDA graphs on a CPU": (
        lambda doc: doc["adapters"]["training"].update(cuda_graphs=True),  # device: cpu
        (),
        r"adapters.training.*cuda_graphs needs a CUDA device and no fp16 loss scaling, got "
        r"device: cpu; set cuda_graphs: false",
    ),
    # issue #20: a model family adapterfleet cannot place adapters in
    "a family with no layout": (
        _unknown_family,
        (),
        r"base_model: model type 'opt' has no built-in layout; adapterfleet knows albert, bert, "
        r".*declare where its layers are under base_model_layout:",
    ),
    "a declared layout path the model lacks": (
        _declared_layout_with_a_wrong_path,
        (),
        r"base_model_layout.ffn_norm: 'output.layer_norm' is not a module of a layer "
        r"\(modules there: .*\); fix the path",
    ),
    "a declared layout without its norm": (
        lambda doc: doc.update(base_model_layout={"layers": "encoder.layer"}),
        (),
        r"base_model_layout: attention_output, attention_norm, ffn_output, ffn_norm, norm missing",
    ),
    # issue #22: out-of-range values that used to reach the trials
    "a negative learning rate in the sweep": (
        lambda doc: doc["adapters"].update(learning_rates=[0.01, -0.001]),
        (),
        r"adapters.learning_rates: expected a number > 0, got -0.001",
    ),
    "max_length beyond the position embeddings": (
        lambda doc: doc.update(max_length=4096),
        (),
        r"max_length: 4096 is more than the 64 positions .*use max_length <= 64",
    ),
    "device cuda without a GPU for the trials": (
        _cuda_without_gpu,
        (),
        r"adapters.training.device: cuda, but resources.gpu is 0",
    ),
    # found by a review of bad configs: these passed validation and failed after Ray started
    "fp16 without a GPU for the trials": (
        lambda doc: doc["adapters"]["training"].update(precision="fp16", device="auto"),
        (),
        r"adapters.training.precision: fp16, but resources.gpu is 0, .*or precision: bf16",
    ),
    "a storage folder that cannot be made": (
        lambda doc: doc.update(storage="/proc/adapterfleet-runs"),
        (),
        r"storage: cannot use /proc/adapterfleet-runs \(cannot make a folder in /proc: .*\); "
        r"choose a writable folder",
    ),
    "a tracking URI MLflow has no store for": (
        lambda doc: doc.update(tracking_uri="ftp://example.org/runs"),
        (),
        r"tracking URI 'ftp://example.org/runs': MLflow has no tracking store for ftp://; use ",
    ),
    "an MLflow file store, which MLflow 3 refuses unless told otherwise": (
        lambda doc: doc.update(tracking_uri="file:///tmp/adapterfleet-file-store"),
        (),
        r"tracking URI 'file:///tmp/adapterfleet-file-store': MLflow's file store is in "
        r"maintenance mode and refused; use sqlite:////tmp/adapterfleet-file-store/mlflow.db ",
    ),
    "a base model path that is not a folder": (
        lambda doc: doc.update(base_model="/no/such/model"),
        (),
        r"base_model: /no/such/model is not a folder on this machine; give a local folder",
    ),
    "a base model folder without weights": (
        _weights_gone,
        (),
        r"base_model: .*no-weights holds no weights \(model.safetensors, .*save_pretrained",
    ),
    "a baseline reduction factor that does not divide the hidden size": (
        lambda doc: doc.update(
            baselines={"systems": ["st-a-houlsby"], "tasks": ["fruit"], "reduction_factor": 7}
        ),
        (),
        r"baselines.reduction_factor: reduction_factor 7 does not divide the hidden size 32",
    ),
    "a local folder's name mistyped (read as a hub id)": (
        lambda doc: doc.update(base_model="mymodle"),
        (),
        r"base_model: cannot load 'mymodle' \(.*\); there is no folder mymodle in /.* either; "
        r"give a local folder",
    ),
    "a local folder's name mistyped, with a slash": (
        lambda doc: doc.update(base_model="models/berrt"),
        (),
        r"base_model: cannot load 'models/berrt' \(.*\); there is no folder models/berrt in /.* "
        r"either; give a local folder",
    ),
    "a name close to the packaged encoder": (
        lambda doc: doc.update(base_model="minilm-l12"),
        (),
        r"base_model: cannot load 'minilm-l12' \(.*\); did you mean minilm-l6",
    ),
    "a fusion over no adapter": (
        lambda doc: doc.update(fusion={"targets": {"fruit": []}}),
        (),
        r"fusion.targets.fruit: fuses no adapter",
    ),
    # it trained and registered every Houlsby adapter, then failed at the fusion (exit 1)
    "a fusion over houlsby adapters": (
        lambda doc: (
            doc["adapters"].update(architecture="houlsby"),
            doc.update(fusion={"targets": {"fruit": "all"}}),
        ),
        (),
        r"fusion.targets: AdapterFusion fuses pfeiffer adapters, and adapters.architecture is "
        r"houlsby; set adapters.architecture: pfeiffer \(.*\), or remove fusion.targets to "
        r"train the Houlsby adapters alone$",
    ),
    "a fusion over houlsby adapters, with fusion-mt-a": (
        lambda doc: (
            doc["adapters"].update(architecture="houlsby"),
            doc.update(
                fusion={"targets": {"fruit": "all"}},
                baselines={"systems": ["mt-a", "fusion-mt-a"], "tasks": ["fruit"]},
            ),
        ),
        (),
        r"fusion.targets: AdapterFusion fuses pfeiffer adapters, .* or remove fusion.targets "
        r"and fusion-mt-a from baselines.systems to train the Houlsby adapters alone$",
    ),
    "a tokenizer without vocabulary": (
        _no_vocabulary,
        (),
        r"base_model: the tokenizer of .*no-vocab' has \d+ tokens .*vocabulary is missing",
    ),
    "a Llama folder without its tokenizer files": (
        _llama_without_tokenizer,
        (),
        r"base_model: cannot load the tokenizer of '.*no-tokenizer-llama': its vocabulary is "
        r"missing \(the folder has no tokenizer.json, tokenizer.model, vocab.txt or vocab.json\); "
        r"put the tokenizer files \(tokenizer.json, or tokenizer.model, or vocab.txt / "
        r"vocab.json \+ merges.txt\) in the folder$",
    ),
    "a tokenizer whose ids the model's embedding lacks": (
        _vocabulary_beyond_the_embedding,
        (),
        r"base_model: the tokenizer of '.*vocab-100' produces ids up to 30521, but the model's "
        r"input embedding has 100 rows \(ids 0 to 99\); use the tokenizer saved with this model, "
        r"or resize the embedding to the tokenizer \(model.resize_token_embeddings",
    ),
    "a pytorch_model.bin that holds more than tensors": (
        _pickle_holding_more_than_tensors,
        (),
        r"base_model: .*pickled/pytorch_model.bin holds more than tensors \(a pathlib.\w+\), "
        r"so it is not loaded \(never load it with weights_only=False: .*\); save the model as "
        r"safetensors \(save_pretrained\) from a source you trust",
    ),
    "a model.safetensors cut short": (
        _weights_cut_short,
        (),
        r"base_model: .*cut/model.safetensors is incomplete or corrupt \(.*\); save the model "
        r"again \(save_pretrained\) or download it again",
    ),
    "a config.json that does not match the weights": (
        _config_of_another_depth,
        (),
        r"base_model: .*deeper: 16 weights of the model its config.json describes are not in "
        r"its checkpoint \(encoder.layer.2.attention.output.LayerNorm.bias, .* and 13 more\), "
        r"and would stay random in the frozen base; give it the config.json that matches",
    ),
    "an encoder-decoder model with a declared layout": (
        _encoder_decoder_with_a_layout,
        (),
        r"base_model: .*t5 is an encoder-decoder model \(t5\), and adapterfleet trains on "
        r"encoder-only or decoder-only bases",
    ),
    "a name longer than file systems allow": (
        lambda doc: doc.update(name="n" * 300),
        (),
        r"name: 300 characters is too long .*at most 64",
    ),
    "--num-cpus 0": (
        lambda doc: None,
        ("--num-cpus", "0"),
        r"--num-cpus: expected an integer >= 1",
    ),
    "--num-cpus -1": (lambda doc: None, ("--num-cpus", "-1"), r"--num-cpus: .* got -1"),
    # issue #22: bad data that used to be trained on
    "a text field holding numbers": (
        _numbers_as_text,
        (),
        r"task 'water', train column 'text' \(text_fields\): holds a number \(0\), not text "
        r"\(record 1 of .*numbers\.jsonl\); name a column of text",
    ),
    "a training split with one label": (
        _one_label,
        (),
        r"task 'water', train 'label': all 40 training rows have the label 'yes'",
    ),
    "bad data in a task only the baselines train": (
        _bad_labels_in_a_baseline_task,
        (),
        r"task 'extra', train 'label': unknown label value 'maybe' \(record 3 of .*extra\.tsv\)",
    ),
    "a training split mostly malformed": (
        _mostly_malformed,
        (),
        r"task 'water', train: 60 of 80 records of .*water_train\.tsv \(75%\) were skipped "
        r"\(malformed at lines 3, 4, 5, 7, 8, \.\.\.\); more than max_skipped_fraction 0.1",
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_bad_pipeline_is_refused_before_any_trial(
    case: str, tmp_path: Path, tiny_model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    edit, args, message = CASES[case]
    # picked at collection, a port is free no longer 40 minutes on: a Ray worker had it in CI
    args = tuple(arg.replace("{closed_port}", str(closed_port())) for arg in args)
    document = config_document(tmp_path, tiny_model)
    edit(document)
    config = write_config(tmp_path, document)
    code, stdout, stderr = run_cli(config, *args) if args else run_here(config, monkeypatch)
    lines = stderr.strip().splitlines()
    assert code == 2, stdout + stderr
    assert lines and lines[-1].startswith("error: "), stderr
    assert sum(line.startswith("error: ") for line in lines) == 1
    assert re.search(message, lines[-1]), lines[-1]
    assert "trial" not in stdout.lower()  # no sweep progress: nothing was scheduled
    assert "Traceback" not in stderr
    assert not (tmp_path / "runs").exists()  # refused before anything is written


def test_a_cluster_that_refuses_the_driver_is_said_in_one_line(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`ray.init` raises `ConnectionError` from the GCS client's error; the 95-line traceback
    it ended in now reads as one line, naming token authentication when that refused."""
    from adapterfleet.orchestration.ray_address import not_joined

    def refused(text: str) -> ConnectionError:
        try:
            try:
                raise RuntimeError(f"Failed to connect to GCS. Last connection error: {text}")
            except RuntimeError as cause:
                raise ConnectionError(
                    "Failed to connect to Ray cluster at 10.0.0.1:6379"
                ) from cause
        except ConnectionError as error:
            return error

    auth = refused("RPC error: InvalidAuthToken: Authentication token is missing or incorrect")
    monkeypatch.delenv("RAY_AUTH_MODE", raising=False)
    assert not_joined("10.0.0.1:6379", auth) == (
        "ray address '10.0.0.1:6379': the cluster uses token authentication and refused this "
        "driver (InvalidAuthToken); set RAY_AUTH_MODE=token here, with its token in "
        "~/.ray/auth_token or RAY_AUTH_TOKEN"
    )
    monkeypatch.setenv("RAY_AUTH_MODE", "token")
    assert not_joined("10.0.0.1:6379", auth).endswith(
        "; put the cluster's token in RAY_AUTH_TOKEN or ~/.ray/auth_token"
    )
    assert not_joined("10.0.0.1:6379", refused("timed out")) == (
        "ray address '10.0.0.1:6379': cannot join the Ray cluster there (Failed to connect to Ray "
        "cluster at 10.0.0.1:6379); give the GCS address ray start --head printed (port 6379 by "
        "default) to --address / RAY_ADDRESS"
    )


def test_a_joined_cluster_that_cannot_place_a_trial_yet_is_told_not_refused(
    tmp_path: Path, tiny_model: Path
) -> None:
    """cluster.yaml's head has no CPUs and its GPU workers start at none: the autoscaler adds
    them as trials ask. A job submitted there was refused before any trial asked (`no node can
    provide that`), so none was ever added. On a cluster joined, that is a warning; a Ray
    started here, where no node will join, still refuses."""
    from adapterfleet.config import ConfigError, parse_config
    from adapterfleet.orchestration.validate import check_resources

    document = {**config_document(tmp_path, tiny_model), "resources": {"cpu": 1, "gpu": 0.25}}
    config = parse_config(document, tmp_path)
    head = [{"CPU": 0.0, "memory": 2e9}]
    with pytest.raises(ConfigError, match=r"no node can provide that .*; lower resources"):
        check_resources(config, head)
    said: list[str] = []
    check_resources(config, head, say=said.append)
    assert said == [
        "warning: resources: a trial needs cpu=1, gpu=0.25 but no node can provide that (nodes: "
        "{CPU: 0, GPU: 0}) now; the trials wait for nodes that can (an autoscaler adds them as "
        "trials ask); without one, stop this run and lower resources or add nodes"
    ]
