"""A hub id on a machine without network: the base model, its tokenizer and a hub dataset load
from the Hugging Face cache at once, or are refused at once in one line, where huggingface_hub
retried every file five times (~25 s, a `Retrying in 8s` line each) first.

Each case runs in a fresh process whose hub is `https://hub.invalid` (a name that never
resolves, RFC 6761), whose cache is the test's own folder, and without HF_HUB_OFFLINE."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HUB_ID = "tiny-org/tiny-bert"
REVISION = "0123456789abcdef0123456789abcdef01234567"


def cached(tiny_model: Path, cache: Path) -> Path:
    """`tiny_model` laid out in a Hugging Face hub cache as HUB_ID at `main`."""
    repo = cache / f"models--{HUB_ID.replace('/', '--')}"
    shutil.copytree(tiny_model, repo / "snapshots" / REVISION)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(REVISION)
    return cache


def offline(argv: list[str], cache: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_OFFLINE")}
    env.update(HF_ENDPOINT="https://hub.invalid", HF_HUB_CACHE=str(cache), HF_HOME=str(cwd))
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def test_a_cached_hub_model_loads_from_the_cache_without_retrying(
    tiny_model: Path, tmp_path: Path
) -> None:
    cache = cached(tiny_model, tmp_path / "hub")
    code = (
        "from adapterfleet.orchestration.validate import base_model_config\n"
        "from adapterfleet.adapters.base_model import load_encoder, load_tokenizer\n"
        f"config = base_model_config({HUB_ID!r})\n"
        f"model = load_encoder({HUB_ID!r})\n"
        f"tokenizer = load_tokenizer({HUB_ID!r})\n"
        "print('LOADED', config.hidden_size, model.config.num_hidden_layers, len(tokenizer))\n"
    )
    done = offline([sys.executable, "-c", code], cache, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "LOADED 32 2 " in done.stdout, done.stdout
    assert "Retrying" not in done.stderr and "hub.invalid" not in done.stderr, done.stderr[-2000:]


@pytest.mark.parametrize("config", ["base", "data"])
def test_what_the_cache_lacks_is_refused_at_once_in_one_line(
    tiny_model: Path, tmp_path: Path, config: str
) -> None:
    cache = cached(tiny_model, tmp_path / "hub")
    (tmp_path / "t.tsv").write_text("sentence\tlabel\na b\t0\nc d\t1\n")
    base = "tiny-org/absent" if config == "base" else HUB_ID
    task = (
        "{hub: nyu-mll/glue, hub_config: rte, train: train, dev: validation, "
        "text_fields: [sentence1, sentence2], label_names: [entailment, not_entailment]}"
        if config == "data"
        else "{train: t.tsv, dev: t.tsv, text_fields: [sentence], label_names: ['0', '1']}"
    )
    (tmp_path / "p.yaml").write_text(
        f"name: p\nbase_model: {base}\nmax_length: 24\ndata_root: .\nstorage: runs\n"
        f"tasks:\n  a: {task}\n"
        "adapters: {reduction_factors: [4]}\n"
    )
    command = str(Path(sys.executable).with_name("adapterfleet"))
    done = offline([command, "run", "p.yaml"], cache, tmp_path)
    lines = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    expected = {
        "base": "error: base_model: cannot load 'tiny-org/absent' (hub.invalid does not resolve "
        "(no network?), and it is not in the Hugging Face cache); there is no folder "
        f"tiny-org/absent in {tmp_path} either; give ",
        "data": "error: task 'a', hub: cannot load nyu-mll/glue (rte): hub.invalid does not "
        "resolve (no network?), and it is not in the datasets cache; check hub/hub_config",
    }[config]
    assert len(lines) == 1 and lines[0].startswith(expected), done.stdout + done.stderr
    assert "Retrying" not in done.stdout + done.stderr
    assert not (tmp_path / "runs").exists()


def test_a_name_close_to_the_packaged_encoder_is_named_in_python_too(tmp_path: Path) -> None:
    """`load_encoder("minilm-l7")` raised Hugging Face's offline error, a hub lookup of a name
    nobody meant; the CLI said `did you mean minilm-l6`, the Python API now does as well."""
    code = (
        "from adapterfleet.adapters import BaseModelError, load_encoder\n"
        "for name in ('minilm-l7', 'MiniLM-L6'):\n"
        "    try:\n"
        "        load_encoder(name)\n"
        "    except BaseModelError as error:\n"
        "        print('REFUSED', error)\n"
    )
    done = offline([sys.executable, "-c", code], tmp_path / "hub", tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    refused = [line for line in done.stdout.splitlines() if line.startswith("REFUSED")]
    assert len(refused) == 2, done.stdout + done.stderr[-2000:]
    for line, name in zip(refused, ("minilm-l7", "MiniLM-L6"), strict=True):
        assert line.startswith(f"REFUSED base_model: cannot load {name!r} (")
        assert line.endswith("did you mean 'minilm-l6', the packaged encoder?")
