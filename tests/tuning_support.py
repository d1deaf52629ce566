"""A tiny world for sweep tests: a random 2-layer BERT, two learnable keyword tasks, a config."""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

# task -> (words of "yes" sentences, words of "no" sentences); both share the filler words
TOPICS = {
    "fruit": ("apple banana cherry grape lemon mango orange pear plum peach", "car bus train"),
    "water": ("river lake sea ocean rain wave boat fish island shore", "rock sand dust"),
}
FILLER = ["the", "a", "small", "big", "red", "blue", "old", "new", "green", "fast"]
PIPELINE = "tinysweep"


def make_tiny_model(folder: Path) -> Path:
    """A random BertModel (hidden 32, 2 layers, 4 heads) with the packaged MiniLM tokenizer."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertModel

    from adapterfleet.adapters.base_model import packaged_minilm_path

    tokenizer = AutoTokenizer.from_pretrained(
        str(packaged_minilm_path(verify=False)), local_files_only=True
    )
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=64,
        initializer_range=0.2,  # at 0.02 attention is uniform and [CLS] ignores the words
    )
    BertModel(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def make_tiny_decoder(folder: Path) -> Path:
    """A random Llama (hidden 32, 2 layers, grouped-query attention) with a real byte-level BPE
    tokenizer trained here on the tasks' words; like GPT-2's and Llama's, it has no pad token."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaModel, PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
    bpe.decoder = decoders.ByteLevel()
    words = " ".join([*(" ".join(pair) for pair in TOPICS.values()), *FILLER, "yes no"])
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=["<|endoftext|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    bpe.train_from_iterator([words] * 4, trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe,
        eos_token="<|endoftext|>",
        bos_token="<|endoftext|>",
        model_input_names=["input_ids", "attention_mask"],
    )
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=64,
        max_position_embeddings=64,
        bos_token_id=tokenizer.eos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        initializer_range=0.2,
    )
    LlamaModel(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def _rows(topic: tuple[str, str], count: int, rng: random.Random) -> list[tuple[str, str]]:
    rows = []
    for index in range(count):
        positive = index % 2 == 0
        vocabulary = topic[0 if positive else 1].split()
        words = rng.sample(FILLER, 3) + rng.choices(vocabulary, k=4)
        rng.shuffle(words)
        rows.append((" ".join(words), "yes" if positive else "no"))
    rng.shuffle(rows)
    return rows


def write_tasks(folder: Path, train: int = 80, dev: int = 40) -> dict[str, Any]:
    """Two tasks: is the sentence about the topic? Returns the `tasks:` mapping."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(0)
    tasks = {}
    for name, topic in TOPICS.items():
        for split, count in (("train", train), ("dev", dev)):
            lines = ["text\tlabel"] + [f"{t}\t{y}" for t, y in _rows(topic, count, rng)]
            (folder / f"{name}_{split}.tsv").write_text("\n".join(lines) + "\n")
        tasks[name] = {
            "train": f"{name}_train.tsv",
            "dev": f"{name}_dev.tsv",
            "text_fields": ["text"],
            "label_field": "label",
            "label_names": ["no", "yes"],
        }
    return tasks


def config_document(root: Path, model: Path, **adapters: Any) -> dict[str, Any]:
    """A pipeline config: two tasks × rf {4, 8} × 1 lr × 1 seed, 2 epochs, all under `root`.
    A trial takes both CPUs of `--num-cpus 2`: the trials run one after another in one Tune
    worker, which pays the imports of torch, transformers and MLflow once (~5 s less a run
    here than two workers side by side); tests of trials side by side set `cpu: 1`."""
    data = root / "data"
    tasks = write_tasks(data)
    training = {"max_epochs": 2, "batch_size": 16, "learning_rate": 0.01, "device": "cpu"}
    return {
        "name": PIPELINE,
        "base_model": str(model),
        "max_length": 24,
        "storage": str(root / "runs"),
        "data_root": str(data),
        "tasks": tasks,
        "adapters": {
            "reduction_factors": [4, 8],
            "learning_rates": [0.01],
            "seeds": [0],
            "training": training,
            **adapters,
        },
        "resources": {"cpu": 2},
    }


def write_config(root: Path, document: dict[str, Any]) -> Path:
    path = root / "pipeline.yaml"
    path.write_text(yaml.safe_dump(document))
    return path


def run_pipeline_cli(path: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`adapterfleet run PATH --num-cpus 2 ARGS` through this venv's console script, as a user
    runs it (its own local Ray), with the test's import path."""
    command = Path(sys.executable).with_name("adapterfleet")
    return subprocess.run(
        [str(command), "run", str(path), "--num-cpus", "2", *args],
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
        capture_output=True,
        text=True,
        timeout=900,
    )


def copy_model(source: Path, target: Path) -> Path:
    shutil.copytree(source, target)
    return target


def mlflow_client(uri: str) -> Any:
    from mlflow import MlflowClient

    return MlflowClient(tracking_uri=uri, registry_uri=uri)


def mlflow_gc(uri: str, run_ids: list[str]) -> None:
    """`mlflow gc --run-ids ...` on the runs, deleted first, as a user purges them (deleting
    their experiment purges them alike): MLflow's own command, run in this process (a new one
    would spend seconds importing MLflow). The registry keeps the versions of those runs."""
    from click.testing import CliRunner
    from mlflow.cli import gc
    from mlflow.tracking._tracking_service import utils as tracking_utils

    client = mlflow_client(uri)
    for run_id in run_ids:
        if client.get_run(run_id).info.lifecycle_stage == "active":
            client.delete_run(run_id)
    command = ["--backend-store-uri", uri, "--tracking-uri", uri, "--run-ids", ",".join(run_ids)]
    # `gc` sets the process's tracking URI, and with it $MLFLOW_TRACKING_URI: every later
    # pipeline of this test process would use this store instead of its own storage's
    before = os.environ.get("MLFLOW_TRACKING_URI"), tracking_utils._tracking_uri
    try:
        result = CliRunner().invoke(gc, command, catch_exceptions=False)
    finally:
        tracking_utils._tracking_uri = before[1]
        if before[0] is None:
            os.environ.pop("MLFLOW_TRACKING_URI", None)
        else:
            os.environ["MLFLOW_TRACKING_URI"] = before[0]
    assert result.exit_code == 0, result.output


def runs_of(uri: str, kind: str) -> list[Any]:
    """Every run (deleted ones too) of the pipeline's experiment with adapterfleet.kind=`kind`."""
    from mlflow.entities import ViewType

    client = mlflow_client(uri)
    experiment = client.get_experiment_by_name(PIPELINE)
    return client.search_runs(
        [experiment.experiment_id],
        filter_string=f"tags.`adapterfleet.kind` = '{kind}'",
        run_view_type=ViewType.ALL,
    )


def metric_steps(uri: str, run_id: str, key: str) -> list[int]:
    return sorted(m.step for m in mlflow_client(uri).get_metric_history(run_id, key))


def version_numbers(uri: str, name: str) -> list[int]:
    versions = mlflow_client(uri).search_model_versions(f"name = '{name}'")
    return sorted(int(v.version) for v in versions)


def expected_best(trial_runs: list[Any], task: str, metric: str = "accuracy") -> str:
    """Trial id the registry should hold for `task`: best dev metric, ties → smaller rf, among
    the trials that finished (one its scheduler stopped early is not registered, and logs no
    final metrics)."""
    from adapterfleet.registry.tags import TAG_STOPPED_EARLY

    mine = [r for r in trial_runs if r.data.tags.get("adapterfleet.task") == task]
    mine = [r for r in mine if TAG_STOPPED_EARLY not in r.data.tags]
    best = max(
        mine,
        key=lambda r: (
            r.data.metrics[f"best_dev_{metric}"],
            -int(r.data.params["reduction_factor"]),
        ),
    )
    return best.data.tags["adapterfleet.trial_id"]


def processes_with(marker: str) -> list[int]:
    """PIDs of live processes started under our driver (Ray workers included): they carry
    the marker in their environment."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if marker.encode() in environ:
            found.append(int(entry.name))
    return found


def end_all(marker: str, grace_s: float) -> None:
    """Give the processes of a driver's run `grace_s` to exit, then SIGKILL each one left
    (Ray's agents outlive a killed driver by a minute; a trial worker must not outlive it)."""
    deadline = time.monotonic() + grace_s
    while processes_with(marker) and time.monotonic() < deadline:
        time.sleep(0.2)
    for _ in range(50):
        pids = processes_with(marker)
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.2)
    raise AssertionError(f"processes {processes_with(marker)} of the sweep do not exit")


def tune_state(folder: Path) -> None:
    """What Tune leaves of an interrupted sweep that can be restored: its tuner.pkl and an
    experiment state (empty files: the plan looks at their presence only)."""
    (folder / "tuner.pkl").write_bytes(b"")
    (folder / "experiment_state-2026-12-03_13-00-00.json").write_text("{}")


def leave_interrupted(
    config: Any, uri: str, experiment: str, name: str, digest: str, settings: dict[str, Any]
) -> None:
    """What Ctrl-C leaves of sweep `name` (of settings hash `digest`) beside its KILLED runs:
    Tune's state and the sweep's note in the experiment folder, the experiment's mark."""
    from adapterfleet.registry.store import get_client
    from adapterfleet.registry.tags import TAG_INTERRUPTED
    from adapterfleet.tuning.plan import META_FILE, experiment_path

    path = experiment_path(config)
    path.mkdir(parents=True)
    tune_state(path)
    tasks = list(config.adapter_tasks)
    note = {"sweep_name": name, "sweep_hash": digest, "tasks": tasks, "settings": settings}
    (path / META_FILE).write_text(json.dumps(note))
    get_client(uri).set_experiment_tag(experiment, TAG_INTERRUPTED, str(int(time.time() * 1000)))
