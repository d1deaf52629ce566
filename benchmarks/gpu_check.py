"""`make gpu-check`: the GPU path, proven on a CUDA machine, in one script.

    python -m benchmarks.gpu_check [--out .bench/gpu-check] [--steps 20] [--only NAME ...]

On a machine without a CUDA device it says so and why, and exits 0: nothing to check there.
On one with a GPU it runs, in order, each step timed and reported even when an earlier one failed
(the report is written anew after each step, so a run cut off at a lease's limit keeps the rest):

    cuda-tests   the test suite's CUDA tests (`pytest -m cuda`), none of them skipped
    versus       the fusion step (N=16, BERT-base shape, bf16) ours against the reference on the
                 same GPU, and the floor: `benchmarks/gpu_versus.py`
    pipeline     `adapterfleet demo` (the demo config, tiny budget) with half a GPU per trial:
                 sweep, registry gate, fusion on the GPU
    predict      `adapterfleet predict` with the fusion the pipeline registered, on the GPU:
                 replayed as CUDA graphs (the default) and eagerly, the same probabilities
    seq-packing  sequence packing on the GPU (`benchmarks/packing.py --device cuda`): length-
                 grouped padding, packed rows with a block-diagonal mask, and variable-length
                 FlashAttention without padding, on real RTE and MRPC token ids, at 32 and 256
                 examples per step, on MiniLM and BERT-base shapes
    widths       what each new padded batch width costs a GPU run (`benchmarks/gpu_widths.py`):
                 two epochs of ST-A on RTE, padded as is, without cuDNN attention, and to a
                 multiple of 8, each in a fresh process
    fit          whole ST-A and fusion (N=16) runs on RTE and MRPC lengths, eager against
                 `training.cuda_graphs` (`benchmarks/gpu_fit.py`), and the GPU memory each run
                 leaves behind in the process
    packing      aggregate ST-A training throughput of 1, 2 and 4 trials sharing one GPU
                 (`gpu: 1, 0.5, 0.25`) on a BERT-base-shaped model, bf16 autocast; in plain
                 processes where Ray is not installed
    ddp          with two GPUs or more: the demo's sweep as trials of two workers (NCCL), one
                 GPU each, against one worker

It prints a Markdown report (device name, each step's outcome and figures) and writes it with a
JSON copy under --out; paste the report into benchmarks/RESULTS.md with the date. The steps that
need Ray and MLflow (pipeline, predict, ddp) say so and are skipped where those are not installed.
On a machine without the packaged MiniLM, `--base-model DIR` gives the pipeline another base (a
saved encoder with its tokenizer; seq-packing and widths time random weights of MiniLM's and
BERT-base's shapes anyway); without ../shared/data/glue, `--tokens FILE` gives them and fit the
token ids that `python -m benchmarks.packing --save-tokens FILE --examples 2490` wrote. Where
the GPU machine has torch but neither Ray nor MLflow nor a package index,
`benchmarks/gpu_bundle.py` packs them to travel and `benchmarks/gpu_remote.sh` runs this there.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SHAPE_BERT_BASE = {
    "hidden_size": 768,
    "num_hidden_layers": 12,
    "num_attention_heads": 12,
    "intermediate_size": 3072,
}
PACKINGS = (1, 2, 4)  # trials sharing one GPU: gpu 1, 0.5, 0.25 each
STEP_TIMEOUT_S = 1200
NEEDS_THE_STACK = ("pipeline", "predict", "ddp")  # Ray and MLflow; the others run on torch alone


def device_summary() -> dict[str, Any] | None:
    """The CUDA devices torch sees (name, memory, bf16), None when there is none."""
    import torch

    if not torch.cuda.is_available():
        return None
    return {
        "count": torch.cuda.device_count(),
        "name": torch.cuda.get_device_name(0),
        "memory_gib": round(torch.cuda.get_device_properties(0).total_memory / 2**30, 1),
        "bf16": torch.cuda.is_bf16_supported(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
    }


def why_no_gpu() -> str:
    import torch

    build = f"a CUDA {torch.version.cuda} build" if torch.version.cuda else "a CPU-only build"
    return f"torch {torch.__version__} ({build}) sees no CUDA device"


def console_script() -> str:
    """The `adapterfleet` of this venv (no activated venv needed), else the one on PATH."""
    beside = Path(sys.executable).with_name("adapterfleet")
    found = str(beside) if beside.is_file() else shutil.which("adapterfleet")
    if found is None:
        raise RuntimeError(f"no adapterfleet console script beside {sys.executable} or on PATH")
    return found


def adapterfleet(*args: str, timeout: float = STEP_TIMEOUT_S) -> subprocess.CompletedProcess:
    """The console script, run from the repository root."""
    command = [console_script(), *args]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "MLFLOW_DISABLE_TELEMETRY": "true"}
    return subprocess.run(
        command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
    )


def checked(result: subprocess.CompletedProcess, what: str) -> str:
    output = result.stdout + result.stderr
    if result.returncode != 0:
        raise RuntimeError(f"{what} exited {result.returncode}: {output[-2000:]}")
    return output


def cuda_test_files() -> list[str]:
    """The test files with CUDA tests: collecting only these needs neither Ray nor MLflow."""
    marker = "pytest.mark.cuda"
    return sorted(
        str(path.relative_to(ROOT))
        for path in (ROOT / "tests").rglob("test_*.py")
        if marker in path.read_text()
    )


def cuda_tests(out: Path, steps: int) -> dict[str, Any]:
    command = [sys.executable, "-m", "pytest", "-m", "cuda", "-q", "-rs", *cuda_test_files()]
    result = subprocess.run(
        command, cwd=ROOT, capture_output=True, text=True, timeout=STEP_TIMEOUT_S
    )
    tail = (result.stdout + result.stderr).strip().splitlines()[-1:]
    if result.returncode != 0 or "skipped" in (tail[0] if tail else ""):
        raise RuntimeError(f"pytest -m cuda: {(result.stdout + result.stderr)[-3000:]}")
    return {"summary": tail[0] if tail else ""}


BASE_MODEL: list[str] = []  # ["-o", "base_model=DIR"] when --base-model is given


def demo_args(storage: Path, *extra: str) -> list[str]:
    return [
        "demo", "-c", "configs/demo.yaml", "-o", "budget=tiny", "-o", f"storage={storage}",
        "-o", "adapters.training.device=cuda", "-o", "fusion.training.device=cuda",
        *BASE_MODEL, *extra,
    ]  # fmt: skip


def pipeline(out: Path, steps: int) -> dict[str, Any]:
    start = time.perf_counter()
    output = checked(
        adapterfleet(*demo_args(out / "demo", "-o", "resources.gpu=0.5", "-o", "resources.cpu=2")),
        "adapterfleet demo on the GPU",
    )
    if "registered demo.fusion.demo_delivery" not in output:
        raise RuntimeError(f"the fusion was not registered: {output[-2000:]}")
    table = [line for line in output.splitlines() if line.startswith("|")]
    return {"wall_s": round(time.perf_counter() - start, 1), "summary": table}


DELIVERY_DEV = "demo-data/delivery_dev.*"  # the demo target's dev split, as the demo writes it


def predict(out: Path, steps: int) -> dict[str, Any]:
    storage = out / "demo"
    inputs = sorted(storage.glob(DELIVERY_DEV))
    if not inputs:
        raise RuntimeError(f"no {DELIVERY_DEV} under {storage}: run the pipeline step")
    walls, probabilities, labels = {}, {}, {}
    runs = {  # auto: the default, graphed and in the training precision (bf16 on this GPU)
        "auto": ["-o", "fusion.training.cuda_graphs=auto"],
        "eager": ["-o", "fusion.training.cuda_graphs=false"],
        "fp32": ["-o", "fusion.training.precision=fp32"],
    }
    for name, overrides in runs.items():
        start = time.perf_counter()
        predictions = out / f"predictions-{name}.jsonl"
        checked(
            adapterfleet(
                "predict", "demo_delivery", "-c", "configs/demo.yaml", "-o", "budget=tiny",
                "-o", f"storage={storage}", "-o", "fusion.training.device=cuda", *overrides,
                *BASE_MODEL, "--input", str(inputs[0]), "--out", str(predictions),
            ),
            "adapterfleet predict on the GPU",
        )  # fmt: skip
        walls[name] = round(time.perf_counter() - start, 1)
        rows = [json.loads(line) for line in predictions.read_text().splitlines()]
        probabilities[name] = [v for row in rows for k, v in row.items() if k.startswith("prob_")]
        labels[name] = [row["prediction"] for row in rows]

    def largest_difference(a: str, b: str) -> float:
        pairs = zip(probabilities[a], probabilities[b], strict=True)
        return max((abs(x - y) for x, y in pairs), default=0.0)

    graphed, precision = largest_difference("auto", "eager"), largest_difference("auto", "fp32")
    if graphed > 1e-3:  # both bf16: the same casts, the same kernels, replayed or not
        raise RuntimeError(f"graphed predict differs from eager by {graphed:.2e}")
    same = sum(a == b for a, b in zip(labels["auto"], labels["fp32"], strict=True))
    return {
        "rows": len(rows),
        "wall_s": walls,
        "max_abs_difference_graphed_vs_eager": graphed,
        "max_abs_difference_bf16_vs_fp32": precision,
        "labels_equal_bf16_vs_fp32": f"{same}/{len(rows)}",
    }


def train_steps(
    shape: dict[str, int], steps: int, batch: int, seq: int, device: str
) -> dict[str, float]:
    """ST-A (pfeiffer rf 16) training steps on a random BERT of `shape`, bf16 autocast on a
    GPU; after 3 warm-up steps, the timed steps' examples and wall-clock span."""
    import torch
    from transformers import BertConfig, BertModel

    from adapterfleet.adapters import (
        AdapterConfig,
        AdapterModel,
        HeadConfig,
        add_adapter,
        train_adapter,
    )
    from adapterfleet.training.runtime import autocast, autocast_dtype, logits_of

    torch.manual_seed(0)
    target = torch.device(device)
    model = AdapterModel(BertModel(BertConfig(**shape)))
    add_adapter(model, "task", AdapterConfig("pfeiffer", 16))
    model.add_head("task", HeadConfig(num_labels=2))
    params = train_adapter(model, "task")
    model.to(target).train()
    optimizer = torch.optim.AdamW(params, lr=1e-4)
    dtype = autocast_dtype("auto" if target.type == "cuda" else "fp32", target)
    ids = torch.randint(1000, 30000, (batch, seq), device=target)
    inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    labels = torch.randint(0, 2, (batch,), device=target)

    def step() -> None:
        with autocast(target, dtype):
            logits = logits_of(model(inputs))
        torch.nn.functional.cross_entropy(logits.float(), labels).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    for _ in range(3):
        step()
    if target.type == "cuda":
        torch.cuda.synchronize()
    start = time.time()
    for _ in range(steps):
        step()
    if target.type == "cuda":
        torch.cuda.synchronize()
    return {"examples": float(steps * batch), "start": start, "end": time.time()}


def packing_throughput(
    shape: dict[str, int], concurrency: int, steps: int, batch: int, seq: int, gpu: bool
) -> dict[str, float]:
    """`concurrency` trainings at once on local Ray, each with 1/concurrency of one GPU (or one
    CPU without a GPU): their aggregate examples/s over the span from the first start to the
    last end."""
    import ray

    share = {"num_gpus": 1 / concurrency, "num_cpus": 1} if gpu else {"num_cpus": 1}
    remote = ray.remote(**share)(train_steps)
    device = "cuda" if gpu else "cpu"
    runs = ray.get([remote.remote(shape, steps, batch, seq, device) for _ in range(concurrency)])
    span = max(r["end"] for r in runs) - min(r["start"] for r in runs)
    examples = sum(r["examples"] for r in runs)
    return {"trials": concurrency, "examples_per_s": round(examples / span, 1), "span_s": span}


def packing_in_processes(concurrency: int, steps: int) -> dict[str, float]:
    """`packing_throughput` without Ray: `concurrency` plain processes on the one GPU, as Ray
    starts fractional-GPU trials (same CUDA_VISIBLE_DEVICES, no memory partition)."""
    code = (
        "import json, sys; from benchmarks.gpu_check import SHAPE_BERT_BASE, train_steps; "
        f"print(json.dumps(train_steps(SHAPE_BERT_BASE, {steps}, 32, 128, 'cuda')))"
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE, text=True)
        for _ in range(concurrency)
    ]
    outputs = [proc.communicate(timeout=STEP_TIMEOUT_S)[0] for proc in procs]
    runs = [json.loads(output.splitlines()[-1]) for output in outputs]
    span = max(r["end"] for r in runs) - min(r["start"] for r in runs)
    examples = sum(r["examples"] for r in runs)
    return {"trials": concurrency, "examples_per_s": round(examples / span, 1), "span_s": span}


def packing(out: Path, steps: int) -> dict[str, Any]:
    if missing("ray"):
        placed = "plain processes (Ray is not installed here)"
        rows = [packing_in_processes(k, steps) for k in PACKINGS]
    else:
        import ray

        placed = "Ray tasks with gpu 1/k"
        ray.init(address="local", include_dashboard=False, log_to_driver=False)
        try:
            rows = [packing_throughput(SHAPE_BERT_BASE, k, steps, 32, 128, True) for k in PACKINGS]
        finally:
            ray.shutdown()
    alone = rows[0]["examples_per_s"]
    for row in rows:
        row["vs_one_trial"] = round(row["examples_per_s"] / alone, 2)
    return {"shape": "bert-base, batch 32 x 128, bf16 autocast", "placed": placed, "rows": rows}


SEQ_PACKING = (("minilm", 32), ("minilm", 256), ("bert-base", 32), ("bert-base", 256))
TOKENS: list[Path] = []  # the --tokens file, when given


def rte_tokens() -> Path | None:
    """The --tokens file, or None where ../shared/data/glue gives RTE and MRPC itself."""
    from benchmarks import packing

    if not TOKENS and not packing.GLUE.is_dir():
        raise RuntimeError(f"{packing.GLUE} is absent: give --tokens (see the module docstring)")
    return TOKENS[0] if TOKENS else None


def seq_packing(out: Path, steps: int) -> dict[str, Any]:
    from benchmarks import packing as module

    tokens = rte_tokens()
    tables = {}
    for shape, batch in SEQ_PACKING:
        result = module.measure(["rte", "mrpc"], 2490, 2, device="cuda", shape=shape,
                                batch=batch, tokens=tokens)  # fmt: skip
        (out / f"seq-packing-{shape}-{batch}.json").write_text(json.dumps(result, indent=1))
        tables[f"{shape}, {batch} examples per step"] = module.markdown(result).splitlines()
    return {"tables": tables}


def widths(out: Path, steps: int) -> dict[str, Any]:
    from benchmarks import gpu_widths

    rows = gpu_widths.measure(rte_tokens())
    return {"rows": rows, "table": gpu_widths.markdown(rows).splitlines()}


def fit(out: Path, steps: int) -> dict[str, Any]:
    from benchmarks import gpu_fit

    result = gpu_fit.measure(out / "fit", rte_tokens(), "bert-base", epochs=3, n=16)
    (out / "gpu-fit.json").write_text(json.dumps(result, indent=1))
    return {"rows": result["rows"]}


def versus(out: Path, steps: int) -> dict[str, Any]:
    from benchmarks import gpu_versus

    result = gpu_versus.measure(out / "versus", reps=max(steps, 10))
    return {"table": gpu_versus.table(result).splitlines(), "ratios": result["ratios"]}


def llm_context(
    out: Path, steps: int, device: str = "cuda", shape: str = "llama", seqs: tuple = (128, 2048)
) -> dict[str, Any]:
    """Fusion at N = 16 on the Llama shape, both sides, at 8 × 128 and 8 × 2,048 tokens (ours
    under bf16 autocast, as a GPU run trains): peak GPU memory, its ratio at the longer context,
    and what a token costs each side (issue #24, item 3; `benchmarks/llm_versus.py`)."""
    from benchmarks import llm_versus

    rows = {}
    for seq in seqs:
        argv = ["--device", device, "--shape", shape, "--n", "16", "--batch", "8", "--seq",
                str(seq), "--reps", "2", "--out", str(out / f"llm-8x{seq}")]  # fmt: skip
        result = llm_versus.measure(llm_versus.parse(argv))
        (out / f"llm-versus-8x{seq}.json").write_text(json.dumps(result, indent=1))
        rows[seq] = result["rows"][0]
    figures: dict[str, Any] = {"rows": {f"8x{seq}": row for seq, row in rows.items()}}
    peaks = {side: [rows[seq].get(side, {}).get("peak_mib") for seq in seqs]
             for side in ("ours", "reference")}  # fmt: skip
    if all(None not in pair for pair in peaks.values()):
        figures[f"memory_ratio_8x{seqs[-1]}"] = round(peaks["reference"][-1] / peaks["ours"][-1], 2)
        tokens = 8 * (seqs[-1] - seqs[0])
        figures["mib_per_token"] = {
            side: round((pair[-1] - pair[0]) / tokens, 3) for side, pair in peaks.items()
        }
    return figures


def missing(*modules: str) -> list[str]:
    """Those of `modules` that cannot be imported here."""
    import importlib.util

    return [name for name in modules if importlib.util.find_spec(name) is None]


def ddp(out: Path, steps: int) -> dict[str, Any]:
    summary = device_summary() or {}
    if summary.get("count", 0) < 2:
        return {"skipped": f"{summary.get('count', 0)} GPU(s): DDP needs two"}
    one_task = ["-o", "adapters.tasks=[demo_sentiment]", "-o", "fusion.targets={}"]
    figures = {}
    for workers in (1, 2):
        storage = out / f"ddp-{workers}"
        start = time.perf_counter()
        checked(
            adapterfleet(
                *demo_args(storage, *one_task, "-o", "resources.gpu=1",
                           "-o", f"resources.workers={workers}")
            ),
            f"the sweep with {workers} worker(s)",
        )  # fmt: skip
        figures[f"workers_{workers}_wall_s"] = round(time.perf_counter() - start, 1)
    return figures


STEPS: dict[str, Callable[[Path, int], dict[str, Any]]] = {
    "cuda-tests": cuda_tests,
    "versus": versus,
    "pipeline": pipeline,
    "predict": predict,
    "seq-packing": seq_packing,
    "widths": widths,
    "fit": fit,
    "packing": packing,
    "ddp": ddp,
    "llm-context": llm_context,
}


def use_inputs(base_model: Path | None, tokens: Path | None) -> None:
    """The pipeline's base model and seq-packing's token ids, where given (else MiniLM, GLUE)."""
    BASE_MODEL[:] = ["-o", f"base_model={base_model.resolve()}"] if base_model else []
    TOKENS[:] = [tokens.resolve()] if tokens else []


def report(device: dict[str, Any], results: dict[str, Any]) -> str:
    lines = [
        f"## GPU check: {device['name']} × {device['count']} ({device['memory_gib']} GiB, "
        f"bf16 {'yes' if device['bf16'] else 'no'}; torch {device['torch']}, CUDA "
        f"{device['cuda']})",
        "",
    ]
    for name, result in results.items():
        lines.append(f"- **{name}**: {json.dumps(result)}")
    return "\n".join(lines) + "\n"


def write_report(out: Path, device: dict[str, Any], results: dict[str, Any]) -> str:
    text = report(device, results)
    (out / "gpu-check.md").write_text(text)
    (out / "gpu-check.json").write_text(json.dumps({"device": device, **results}, indent=2))
    return text


def run_steps(
    names: list[str],
    out: Path,
    steps: int,
    device: dict[str, Any],
    table: dict[str, Callable[[Path, int], dict[str, Any]]] = STEPS,
) -> dict[str, Any]:
    """Each named step, timed and reported even when an earlier one failed; the report is written
    after every step, so a run killed at a lease's time limit keeps the steps it finished."""
    out.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {}
    for name in names:
        print(f"gpu-check: {name} ...", flush=True)
        start = time.perf_counter()
        absent = missing("ray", "mlflow") if name in NEEDS_THE_STACK else []
        try:
            if absent:
                results[name] = {"ok": True, "skipped": f"{', '.join(absent)} not installed"}
            else:
                results[name] = {"ok": True, **table[name](out, steps)}
        except Exception as error:  # noqa: BLE001 - every step is reported
            results[name] = {"ok": False, "error": str(error)[-1500:]}
        results[name]["seconds"] = round(time.perf_counter() - start, 1)
        print(f"gpu-check: {name}: {'ok' if results[name]['ok'] else 'FAILED'}", flush=True)
        write_report(out, device, results)
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / ".bench" / "gpu-check")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--only", nargs="+", choices=list(STEPS), default=list(STEPS))
    parser.add_argument("--base-model", type=Path, help="the pipeline's base instead of MiniLM")
    parser.add_argument(
        "--tokens", type=Path, help="the token ids of seq-packing, widths and fit without GLUE"
    )
    args = parser.parse_args(argv)
    use_inputs(args.base_model, args.tokens)
    device = device_summary()
    if device is None:
        print(f"gpu-check: skipped, nothing ran: {why_no_gpu()}; run it on a CUDA machine")
        return 0
    results = run_steps(args.only, args.out, args.steps, device)
    print(report(device, results))
    return 0 if all(r["ok"] for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
