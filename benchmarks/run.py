"""adapterfleet against the reference (AdapterHub `adapters` 1.3.0): speed, memory, agreement.

    python -m benchmarks.run                  # the full suite (~20 min on 2 cores)
    python -m benchmarks.run --quick          # smoke test: 1 repetition, smallest configurations
    python -m benchmarks.run --only minilm    # configurations whose name contains "minilm"
    python -m benchmarks.run --reps 5         # exactly 5 timed repetitions per measurement

Each implementation × configuration runs in a fresh process (ours in this venv, the reference in
its own venv, built on first use by `benchmarks/refenv.py`), alternating which side goes first.
Both sides load the same random base weights from one folder and get the same seeded inputs.
A full run writes benchmarks/RESULTS.md and benchmarks/results.json; a run with --quick or
--only writes .bench/RESULTS-partial.md and .bench/results-partial.json instead.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks import refenv, scripted

ROOT = Path(__file__).resolve().parent.parent
HERE = ROOT / "benchmarks"
WORK = ROOT / ".bench"
GLUE = ROOT.parent / "shared" / "data" / "glue"
TASKS_CONFIG = ROOT / "configs" / "glue.yaml"
OURS, REF = "ours", "reference"
WORKER = {
    OURS: "benchmarks.worker_ours",
    REF: "benchmarks.worker_ref",
    "llm": "benchmarks.worker_llm",
}
TIMEOUT_S = 900
OPTIONAL_AFTER_S = 18 * 60  # keep a full run near 25 minutes on 2 cores

SHAPES = {
    # BertConfig keyword arguments; random weights, vocab 30522 (BERT's)
    "bert-base": {"hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12,
                  "intermediate_size": 3072},
    "minilm": {"hidden_size": 384, "num_hidden_layers": 6, "num_attention_heads": 12,
               "intermediate_size": 1536},
}  # fmt: skip
TRAIN_BATCH = {"bert-base": 8, "minilm": 32}


@dataclass
class Bench:
    name: str
    title: str
    kind: str  # fusion_train, single_train, fusion_infer, check, real, orchestration, llm_memory,
    # or one of scripted.KINDS
    spec: dict[str, Any]
    quick: bool = False  # part of --quick
    optional: bool = False  # skipped when the run has already used OPTIONAL_AFTER_S
    results: dict[str, dict[str, Any]] = field(default_factory=dict)
    load: str = ""  # load average when the configuration started


def suite(quick: bool) -> list[Bench]:
    benches = [
        Bench("check-minilm", "agreement: single adapter and fusion (N=4), MiniLM shape",
              "check", {"shape": "minilm", "n": 4, "batch": 4, "seq": 64}, quick=True),
    ]  # fmt: skip
    for shape in ("bert-base", "minilm"):
        batch = TRAIN_BATCH[shape]
        for n in (2, 8, 16):
            benches.append(
                Bench(
                    f"fusion-train-{shape}-n{n}",
                    f"fusion training step, N={n}, {shape} shape, {batch}×128",
                    "fusion_train",
                    {"shape": shape, "n": n, "batch": batch, "seq": 128, "lr": 5e-5},
                    quick=n == 2,
                )
            )
        benches.append(
            Bench(
                f"single-train-{shape}",
                f"single-adapter training step (pfeiffer rf=16), {shape} shape, {batch}×128",
                "single_train",
                {"shape": shape, "n": 1, "batch": batch, "seq": 128, "lr": 1e-4},
                quick=True,
            )
        )
    infer = {
        shape: Bench(
            f"fusion-infer-{shape}-n16",
            f"fusion inference, N=16, {shape} shape, 32×128",
            "fusion_infer",
            {"shape": shape, "n": 16, "batch": 32, "seq": 128},
            quick=shape == "minilm",
            optional=shape == "bert-base",
        )
        for shape in ("minilm", "bert-base")
    }
    benches.append(infer["minilm"])
    examples = 64 if quick else 320
    for task, folder in (("rte", "RTE"), ("sst2", "SST-2")):
        benches.append(
            Bench(
                f"st-a-{task}-minilm",
                f"ST-A training throughput, real {folder} ({examples} examples), real MiniLM",
                "real",
                {"task": task, "folder": folder, "examples": examples, "batch": 32,
                 "max_length": 128, "lr": 1e-4, "epochs": 1 if quick else 2},
                quick=True,
            )
        )  # fmt: skip
    benches.append(
        Bench(
            "orchestration-local-ray",
            "adapter stage of 4 tasks × 2 configurations, then a fusion over the 4, local Ray",
            "orchestration",
            {"tasks": 4, "configs": 2, "examples": 300, "cpus": 2},
        )
    )
    benches.append(infer["bert-base"])  # last: run only if time allows
    benches.append(
        Bench(  # the batch of the GPU figures, where the training step folds (FusionLayer.folds)
            "fusion-train-b32-bert-base-n16",
            "fusion training step, N=16, bert-base shape, 32×128",
            "fusion_train",
            {"shape": "bert-base", "n": 16, "batch": 32, "seq": 128, "lr": 5e-5},
            optional=True,
        )
    )
    benches.append(
        Bench(
            "llm-memory",
            "big bases: ST-A and fusion (N=4) steps on a Llama shape, fp32/bf16 base, "
            "with and without activation checkpointing, 8×128",
            "llm_memory",
            {"batch": 8, "seq": 128},
            optional=True,  # ~20 min: in a full run only with --only llm-memory
        )
    )
    benches += [  # measured by their own scripts (benchmarks/scripted.py); each a few minutes
        Bench("fusion-profile", "the N=16 fusion step against the frozen base, by operator, "
              "BERT-base shape, 8×128", "fusion_profile",
              {"n": 16, "batch": 8, "seq": 128, "steps": 3}, optional=True),
        Bench("llm-versus", "fusion on a Llama shape (bf16 base), N = 4, 16, 32, 4×128",
              "llm_versus", {"n": [4, 16, 32], "batch": 4, "seq": 128}, optional=True),
        Bench("packing", "sequence packing against length-grouped batches, ST-A, real RTE and "
              "MRPC", "packing", {"tasks": ["rte", "mrpc"], "examples": 320, "epochs": 2},
              optional=True),
    ]  # fmt: skip
    return benches


# --------------------------------------------------------------------------- processes


def _env(threads: int, side: str = OURS) -> dict[str, str]:
    """A worker's environment: no inherited PYTHONPATH (each side imports only its own
    packages), the project's `src` on our side's path (where it is not installed, as on a lent
    GPU machine), one thread count for every library."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    if side == OURS:
        env["PYTHONPATH"] = str(ROOT / "src")
    env.update({var: str(threads) for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")})
    env.update(
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        TOKENIZERS_PARALLELISM="false",
        TRANSFORMERS_VERBOSITY="error",
        PYTHONWARNINGS="ignore",
    )
    return env


def run_worker(
    python: str, side: str, spec: dict, folder: Path, threads: int, timeout_s: float = TIMEOUT_S
) -> dict[str, Any]:
    """Run one worker process, killed after `timeout_s`; its result plus wall time and peak RSS
    (from wait4)."""
    folder.mkdir(parents=True, exist_ok=True)
    spec_path, out_path, log_path = (
        folder / f"{side}.{x}" for x in ("spec.json", "out.json", "log")
    )
    spec_path.write_text(json.dumps(spec, indent=1))
    out_path.unlink(missing_ok=True)
    command = [python, "-m", WORKER[side], str(spec_path), str(out_path)]
    start = time.perf_counter()
    with open(log_path, "w") as log:
        proc = subprocess.Popen(command, cwd=ROOT, env=_env(threads, side), stdout=log, stderr=log)
        timed_out = threading.Event()
        timer = threading.Timer(timeout_s, lambda: (timed_out.set(), proc.kill()))
        timer.start()
        _, status, usage = os.wait4(proc.pid, 0)
        timer.cancel()
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - start
    if timed_out.is_set():
        return {"error": f"killed at its time limit, {timeout_s:g} s", "wall_s": wall}
    if proc.returncode != 0 or not out_path.is_file():
        tail = log_path.read_text(errors="replace").strip().splitlines()[-6:]
        return {"error": f"exit {proc.returncode}: " + " | ".join(tail), "wall_s": wall}
    result = json.loads(out_path.read_text())
    result["wall_s"] = wall
    result["max_rss_mb"] = usage.ru_maxrss / 1024  # KiB on Linux
    return result


# --------------------------------------------------------------------------- inputs


def make_base(shape: str, folder: Path) -> Path:
    """A random BertModel of `shape` saved with save_pretrained: both sides load these weights."""
    import torch
    from transformers import BertConfig, BertModel

    path = folder / f"base-{shape}"
    if not (path / "config.json").is_file():
        from transformers.utils import logging

        logging.disable_progress_bar()
        torch.manual_seed(0)
        model = BertModel(BertConfig(**SHAPES[shape]), add_pooling_layer=False)
        model.save_pretrained(path)
    return path


def write_examples(task: str, examples: int, folder: Path) -> tuple[dict, Path]:
    """The task's first `examples` training rows as the project loads them (the same rows for
    both sides): our worker's overrides and a JSON file of texts for the reference."""
    from adapterfleet.data import load_task, load_tasks_config

    overrides = {f"tasks.{task}.max_train_examples": examples, f"tasks.{task}.max_dev_examples": 64}
    data = load_task(load_tasks_config(TASKS_CONFIG, overrides)[task]).split("train").to_dict()
    rows = {k: list(data[k]) for k in ("text_a", "text_b", "label") if k in data}
    path = folder / f"examples-{task}.json"
    path.write_text(json.dumps(rows))
    return overrides, path


# --------------------------------------------------------------------------- running


def run_llm_memory(bench: Bench, args) -> None:
    """Ours only (benchmarks/llm_memory.py): eight settings, each in its own worker process."""
    from benchmarks import llm_memory

    argv = [f"--batch={bench.spec['batch']}", f"--seq={bench.spec['seq']}"]
    argv += [f"--threads={args.threads}"] + ([f"--reps={args.reps}"] if args.reps else [])
    payload = llm_memory.run(llm_memory.parse(argv), argv)
    failed = [f"{r['step']} {r['setting']}" for r in payload["rows"] if "error" in r["result"]]
    if failed:
        payload["error"] = "failed: " + ", ".join(failed)
    bench.results[OURS] = payload


def run_bench(bench: Bench, index: int, pythons: dict[str, str], args, folder: Path) -> None:
    if bench.kind == "llm_memory":
        run_llm_memory(bench, args)
        return
    if bench.kind in scripted.KINDS:  # ours only, or both sides inside the script
        print("  measuring ...", flush=True)
        bench.results[OURS] = scripted.KINDS[bench.kind](bench.spec, args)
        return
    if bench.kind == "orchestration":  # ours only: the reference has no orchestration
        from benchmarks import orchestration

        print(f"  {OURS:9s} ...", end=" ", flush=True)
        result = orchestration.run(**bench.spec, keep=None)
        bench.results[OURS] = result
        print(result.get("error") or f"makespan {result['makespan_over_ideal']}× ideal", flush=True)
        return
    spec = dict(bench.spec, kind=bench.kind, seed=0)
    if bench.kind == "real":
        from adapterfleet.adapters.base_model import packaged_minilm_path

        overrides, examples = write_examples(spec["task"], spec["examples"], folder)
        spec.update(
            tasks_config=str(TASKS_CONFIG),
            overrides=overrides,
            examples=str(examples),
            model_dir=str(packaged_minilm_path()),
        )
    else:
        spec["base_dir"] = str(make_base(spec["shape"], folder))
    if bench.kind == "check":
        spec["check_dir"] = str(folder / bench.name)
        Path(spec["check_dir"]).mkdir(parents=True, exist_ok=True)
    spec.update(warmup=1, reps=args.reps, budget_s=args.budget, threads=args.threads)
    order = [OURS, REF] if bench.kind == "check" or index % 2 == 0 else [REF, OURS]
    for side in order:
        print(f"  {side:9s} ...", end=" ", flush=True)
        result = run_worker(pythons[side], side, spec, folder / bench.name, args.threads)
        bench.results[side] = result
        print(_one_line(bench, result), flush=True)
        if bench.kind == "check" and "error" in result:
            break


def _one_line(bench: Bench, result: dict) -> str:
    if "error" in result:
        return "FAILED " + result["error"][-300:]
    rss = f"peak RSS {result['max_rss_mb']:.0f} MiB, process {result['wall_s']:.0f} s"
    if "times" in result:
        s = _summary(result["times"])
        return f"{s['median']:.3f} s/step (min {s['min']:.3f}, {len(result['times'])} reps), {rss}"
    if "throughputs" in result:
        return f"{statistics.median(result['throughputs']):.1f} examples/s, {rss}"
    if "errors" in result:
        return "max rel. error " + ", ".join(f"{k} {v:.1e}" for k, v in result["errors"].items())
    return rss


def _summary(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


# --------------------------------------------------------------------------- report


def _machine(threads: int) -> dict[str, Any]:
    cpu = platform.processor()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "torch_threads": threads,
            "python": platform.python_version(), "platform": platform.platform()}  # fmt: skip


def _ours_versions() -> dict[str, str]:
    from importlib.metadata import version

    return {p: version(p) for p in ("torch", "transformers", "adapterfleet")}


def _fmt(x: float | None, digits: int = 3) -> str:
    return "—" if x is None else f"{x:.{digits}f}"


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def _rows(benches: list[Bench]) -> tuple[list[dict], list[dict], list[dict]]:
    timed, real, checks = [], [], []
    for bench in benches:
        ours, ref = bench.results.get(OURS, {}), bench.results.get(REF, {})
        if bench.kind in ("orchestration", "llm_memory", *scripted.KINDS):
            continue  # its own section
        if bench.kind == "check":
            checks.append(
                {"name": bench.name, "title": bench.title, "ours": ours, "reference": ref}
            )
            continue
        key = "throughputs" if bench.kind == "real" else "times"
        if not bench.results:
            continue  # skipped
        row: dict[str, Any] = {"name": bench.name, "title": bench.title, "kind": bench.kind}
        row["load"] = bench.load
        for side, res in ((OURS, ours), (REF, ref)):
            row[side] = _summary(res[key]) if key in res else None
            row[f"{side}_rss_mb"] = res.get("max_rss_mb")
            row[f"{side}_error"] = res.get("error")
        om = row[OURS]["median"] if row[OURS] else None
        rm = row[REF]["median"] if row[REF] else None
        row["speedup"] = _ratio(om, rm) if bench.kind == "real" else _ratio(rm, om)
        if "cpu_times" in ours and "cpu_times" in ref:
            row["cpu_s"] = {OURS: _summary(ours["cpu_times"]), REF: _summary(ref["cpu_times"])}
            row["cpu_speedup"] = _ratio(row["cpu_s"][REF]["median"], row["cpu_s"][OURS]["median"])
        row["memory_ratio"] = _ratio(row[f"{REF}_rss_mb"], row[f"{OURS}_rss_mb"])
        (real if bench.kind == "real" else timed).append(row)
    return timed, real, checks


def write_report(benches: list[Bench], meta: dict, md_path: Path, json_path: Path) -> str:
    timed, real, checks = _rows(benches)
    payload = {"meta": meta, "timed": timed, "real_data": real, "checks": checks,
               "raw": {b.name: b.results for b in benches}}  # fmt: skip
    json_path.write_text(json.dumps(payload, indent=1, default=str) + "\n")

    m = meta
    lines = [
        "# Benchmarks: adapterfleet vs AdapterHub `adapters` (reference)",
        "",
        f"Generated by `python -m benchmarks.run{m['argv']}` on {m['date']}; "
        f"wall time of the run {m['wall_s'] / 60:.1f} min.",
        "",
        f"- Machine: {m['machine']['cpu']}, {m['machine']['cores']} cores, "
        f"torch threads {m['machine']['torch_threads']} per process (interop 1); "
        f"Python {m['machine']['python']}. The CPU is shared with other work: load average "
        f"{m['load_before']} before the run, {m['load_after']} after.",
        f"- Ours: {_kv(m['versions'][OURS])}. Reference: {_kv(m['versions'][REF])} "
        "(its own virtualenv).",
        f"- Attention: ours `{m['attn'].get(OURS, '?')}`, reference `{m['attn'].get(REF, '?')}`.",
        "- Method: one fresh process per implementation × configuration, alternating which side "
        "goes first; both load the same random base weights (saved once with `save_pretrained`) "
        "and get the same seeded random token ids (full attention mask). One warm-up step, then "
        "timed repetitions (at least 3, more while under the time budget; `--reps` fixes the "
        "count). Training step = forward + cross-entropy (+ the fusion V regulariser) + backward "
        "+ AdamW step, only the adapter or fusion (and the head) trainable; inference = forward "
        "under `torch.inference_mode()`. Peak memory = max RSS of the whole worker process "
        "(from `wait4`; includes the Python/torch baseline of a few hundred MiB).",
        "",
        *_target_lines(benches, timed, real),
        "## Time per step",
        "",
        "Wall seconds per step, median (min–max). Speed-up = reference median / ours median "
        "(> 1: ours is faster). Speed-up by CPU time: the same with the process CPU time of "
        "each step (all threads), less sensitive to other work on the machine; per-step CPU "
        "seconds are in results.json. Memory ratio = reference peak RSS / ours.",
        "",
        "| configuration | ours s/step | reference s/step | speed-up | speed-up by CPU time "
        "| ours peak RSS MiB | reference peak RSS MiB | memory ratio | load at start |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in timed:
        lines.append(
            f"| {row['title']} | {_cell(row, OURS)} | {_cell(row, REF)} "
            f"| {_fmt(row['speedup'], 2)}× | {_fmt(row.get('cpu_speedup'), 2)}× "
            f"| {_fmt(row[f'{OURS}_rss_mb'], 0)} "
            f"| {_fmt(row[f'{REF}_rss_mb'], 0)} | {_fmt(row['memory_ratio'], 2)}× "
            f"| {row['load'].split(' ')[0]} |"
        )
    lines += ["", "## Real data: ST-A training throughput", ""]
    if m.get("real_skipped"):
        lines.append(m["real_skipped"])
    elif real:
        lines += [
            "Examples per second over each training epoch (median, min–max over epochs; "
            "tokenisation and dev evaluation not timed). Ours: `train_single('st-a', …)` — "
            "length-grouped batches, padding per batch. Reference: the `adapters` example "
            "defaults — padding to max_length 128, random batches; a plain loop doing what "
            "the Trainer does per step (AdamW, linear decay, gradient clipping at 1.0). "
            "Batch 32, lr 1e-4, pfeiffer rf=16, the packaged all-MiniLM-L6-v2.",
            "",
            "| configuration | ours examples/s | reference examples/s | speed-up "
            "| tokens per example (ours padded / ref padded / real) | ours peak RSS MiB "
            "| reference peak RSS MiB | memory ratio |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for row, bench in zip(
            real, [b for b in benches if b.kind == "real" and b.results], strict=True
        ):
            o, r = bench.results.get(OURS, {}), bench.results.get(REF, {})
            lengths = (
                f"{_fmt(o.get('mean_padded_length'), 1)} / {_fmt(r.get('mean_padded_length'), 0)}"
                f" / {_fmt(o.get('mean_length'), 1)}"
            )
            lines.append(
                f"| {row['title']} | {_cell(row, OURS, 1)} | {_cell(row, REF, 1)} "
                f"| {_fmt(row['speedup'], 2)}× | {lengths} | {_fmt(row[f'{OURS}_rss_mb'], 0)} "
                f"| {_fmt(row[f'{REF}_rss_mb'], 0)} | {_fmt(row['memory_ratio'], 2)}× |"
            )
    lines += _orchestration_lines(benches)
    lines += ["", "## Agreement check", ""]
    for check in checks:
        ref = check["reference"]
        if "errors" in ref:
            worst = max(ref["errors"].values())
            verdict = "AGREE" if worst < 1e-4 else "DISAGREE"
            lines.append(
                f"{check['title']}: **{verdict}** (threshold: relative error < 1e-4). The same "
                f"random base, {ref['loaded_weights']} adapter/fusion/head tensors drawn at random "
                "by ours and loaded into the reference under its names (every reference adapter, "
                "fusion and head parameter covered), inputs with padding, eval mode. "
                "Relative error = max |ours − ref| / max |ref|:"
            )
            lines.append("")
            effect = ref.get("effect", {})
            if effect:
                lines.append(
                    "For scale, the adapters move the last hidden states by "
                    + ", ".join(f"{v:.2f} ({k})" for k, v in effect.items())
                    + " in the same measure, relative to the base model without adapters."
                )
                lines.append("")
            for key, value in ref["errors"].items():
                what = (
                    "gradients of all fusion Q/K/V (CE + V regulariser)"
                    if key == "fusion.grads"
                    else key
                )
                lines.append(f"- {what}: {value:.1e}")
        else:
            err = ref.get("error") or check["ours"].get("error") or "not run"
            lines.append(f"{check['title']}: **FAILED** — {err}")
    failures = [
        f"- {row['name']} ({side}): {row[f'{side}_error']}"
        for row in timed + real
        for side in (OURS, REF)
        if row.get(f"{side}_error")
    ]
    if failures:
        lines += ["", "## Failures", "", *failures]
    if m.get("notes"):
        lines += ["", "## Notes", "", *[f"- {n}" for n in m["notes"]]]
    text = "\n".join(lines) + "\n" + _kept_blocks(md_path, _fresh_blocks(benches))
    md_path.write_text(text)
    return text


def _fresh_blocks(benches: list[Bench]) -> dict[str, str]:
    """Blocks this run measured anew, by marker name: the big-base block of llm_memory.py and
    the tables of the scripted configurations."""
    from benchmarks import llm_memory

    found = [b.results[OURS] for b in benches
             if b.kind == "llm_memory" and "rows" in b.results.get(OURS, {})]  # fmt: skip
    fresh = {"llm-memory": llm_memory.markdown(found[-1]).strip()} if found else {}
    for bench in benches:
        result = bench.results.get(OURS, {})
        if bench.kind in scripted.KINDS and result and "error" not in result:
            name = f"{bench.name}-table"
            table = scripted.block(bench.kind, result)
            fresh[name] = f"<!-- {name}:begin -->\n{table}\n<!-- {name}:end -->"
    return fresh


def _kept_blocks(md_path: Path, fresh: dict[str, str] | None = None) -> str:
    """The blocks other scripts keep in the report (between `<!-- NAME:begin -->` and
    `<!-- NAME:end -->`, e.g. benchmarks/fleet.py's), carried over when it is rewritten; a block
    in `fresh` replaces the one of that name, or is added after them."""
    fresh = dict(fresh or {})
    text = md_path.read_text() if md_path.is_file() else ""
    blocks = re.finditer(r"<!-- ([\w-]+):begin -->.*?<!-- \1:end -->", text, re.S)
    kept = [fresh.pop(block.group(1), block.group(0)) for block in blocks]
    return "".join("\n" + block + "\n" for block in [*kept, *fresh.values()])


# (configuration, what, comparison, target): the targets for this machine
TARGETS = [
    ("fusion-train-bert-base-n16", "speedup", ">=", 3.0),
    ("fusion-train-bert-base-n16", "memory_ratio", ">=", 2.0),
    ("fusion-infer-minilm-n16", "speedup", ">=", 3.0),
    ("fusion-infer-bert-base-n16", "speedup", ">=", 3.0),
    ("single-train-bert-base", "speedup", ">=", 1.0),
    ("single-train-minilm", "speedup", ">=", 1.0),
    ("st-a-rte-minilm", "speedup", ">=", 2.0),
    ("st-a-sst2-minilm", "speedup", ">=", 2.0),
    ("orchestration-local-ray", "makespan_over_ideal", "<=", 1.2),
    ("orchestration-local-ray", "registration_to_first_step_s", "<=", 5.0),
]
_WHAT = {"speedup": "speed-up", "memory_ratio": "memory ratio (reference / ours)",
         "makespan_over_ideal": "makespan / ideal",
         "registration_to_first_step_s": "last registration → fusion's first step, s"}  # fmt: skip


def _target_lines(benches: list[Bench], timed: list[dict], real: list[dict]) -> list[str]:
    rows = {row["name"]: row for row in timed + real}
    for bench in benches:
        if bench.kind == "orchestration" and OURS in bench.results:
            rows[bench.name] = bench.results[OURS]
    lines = [
        "## Targets",
        "",
        "| configuration | figure | target | measured | |",
        "|---|---|---|---|---|",
    ]
    for name, what, op, goal in TARGETS:
        value = rows.get(name, {}).get(what)
        if value is None:
            verdict, shown = "not run", "—"
        else:
            met = value >= goal if op == ">=" else value <= goal
            verdict, shown = ("met" if met else "**missed**"), f"{value:.2f}"
        lines.append(f"| {name} | {_WHAT[what]} | {op.replace('>=', '≥').replace('<=', '≤')} "
                     f"{goal:g} | {shown} | {verdict} |")  # fmt: skip
    return [*lines, ""]


def _orchestration_lines(benches: list[Bench]) -> list[str]:
    found = [b for b in benches if b.kind == "orchestration" and b.results]
    if not found:
        return []
    bench, r = found[0], found[0].results[OURS]
    lines = ["", "## Orchestration on local Ray", ""]
    if "error" in r:
        return [*lines, f"{bench.title}: **FAILED** — {r['error']}"]
    first = r.get("registration_to_first_step_s")
    start = r.get("registration_to_training_start_s")
    return [
        *lines,
        f"`python -m benchmarks.orchestration` ({bench.title}; generated demo tasks, "
        f"{r['examples']} training examples each, 1 epoch, the packaged MiniLM, a SQLite "
        f"MLflow store, `adapterfleet run --num-cpus {r['slots']}` in a fresh process). "
        "Times from MLflow's run and model-version timestamps.",
        "",
        "| figure | value | target |",
        "|---|---|---|",
        f"| makespan of the adapter stage (first trial start → last trial end) "
        f"| {r['makespan_s']} s | |",
        f"| ideal: Σ trial durations / {r['slots']} slots | {r['ideal_s']} s "
        f"(trials {', '.join(str(t) for t in r['trial_seconds'])} s) | |",
        f"| makespan / ideal | {r['makespan_over_ideal']}× | ≤ 1.2× |",
        f"| before it: sweep start → first trial start "
        f"| {r['first_trial_start_after_sweep_s']} s (with it: {r['makespan_with_start_up_s']} s) "
        "| |",
        f"| last trial end → last adapter registered | "
        f"{r['last_adapter_registered_after_last_trial_s']} s | |",
        f"| last registration → fusion training code starts | {_fmt(start, 1)} s | |",
        f"| last registration → fusion's first step | {_fmt(first, 1)} s | ≤ 5 s |",
        f"| whole pipeline, wall | {r['pipeline_wall_s']} s | |",
    ]


def _kv(d: dict[str, str]) -> str:
    return ", ".join(f"{k} {v}" for k, v in d.items())


def _cell(row: dict, side: str, digits: int = 3) -> str:
    s = row[side]
    if s is None:
        return "failed"
    return f"{s['median']:.{digits}f} ({s['min']:.{digits}f}–{s['max']:.{digits}f})"


def _load() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "?"


# --------------------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="1 repetition, smallest configs")
    parser.add_argument("--only", help="run configurations whose name contains this (a,b: any)")
    parser.add_argument("--reps", type=int, help="exactly this many timed repetitions")
    parser.add_argument(
        "--budget",
        type=float,
        default=12.0,
        help="seconds of timed steps per process before stopping (min 3 reps)",
    )
    parser.add_argument("--threads", type=int, default=2, help="torch threads per process")
    parser.add_argument("--list", action="store_true", help="list the configurations and exit")
    parser.add_argument(
        "--from-json", type=Path, help="only re-write the Markdown from this results.json"
    )
    args = parser.parse_args(argv)
    if args.from_json:
        return rerender(args.from_json)
    if args.quick and args.reps is None:
        args.reps = 1
    benches = [b for b in suite(args.quick) if b.quick or not args.quick]
    if args.only:
        patterns = [p.strip() for p in args.only.split(",") if p.strip()]
        benches = [b for b in benches if any(p in b.name for p in patterns)]
    notes: list[str] = []
    real_skipped = None
    if not GLUE.is_dir() and any(b.kind == "real" for b in benches):
        real_skipped = (
            f"Skipped: {GLUE} is missing (the real-data benchmarks read GLUE from there)."
        )
        print(real_skipped)
        benches = [b for b in benches if b.kind != "real"]
    if not benches:
        print(f"no configuration matches --only {args.only!r}; --list names them", file=sys.stderr)
        return 1
    if args.list:
        width = max((len(bench.name) for bench in benches), default=0)
        for bench in benches:
            print(f"{bench.name:{width}s}  {bench.title}")
        return 0

    partial = args.quick or bool(args.only)
    md_path = WORK / "RESULTS-partial.md" if partial else HERE / "RESULTS.md"
    json_path = WORK / "results-partial.json" if partial else HERE / "results.json"
    WORK.mkdir(exist_ok=True)
    pythons = {OURS: sys.executable, REF: str(refenv.ensure_ref_venv())}
    started, load_before = time.perf_counter(), _load()
    print(f"{len(benches)} configurations; load average {load_before}")
    folder = Path(tempfile.mkdtemp(prefix="run-", dir=WORK))
    try:
        for index, bench in enumerate(benches):
            print(f"[{index + 1}/{len(benches)}] {bench.name}: {bench.title}", flush=True)
            elapsed = time.perf_counter() - started
            if bench.optional and not args.only and elapsed > OPTIONAL_AFTER_S:
                note = (
                    f"{bench.name} skipped: the run had taken {elapsed / 60:.0f} min by then "
                    f"(optional configurations run only within the first "
                    f"{OPTIONAL_AFTER_S // 60} min; run it with --only {bench.name})"
                )
                print("  " + note)
                notes.append(note)
                continue
            bench.load = _load()
            try:
                run_bench(bench, index, pythons, args, folder)
            except Exception as exc:  # noqa: BLE001 - one broken configuration must not stop the rest
                print(f"  FAILED to prepare: {exc!r}", flush=True)
                bench.results.setdefault(OURS, {"error": f"preparation failed: {exc!r}"})
    finally:
        shutil.rmtree(folder, ignore_errors=True)

    attn = {}
    for bench in benches:
        for side, result in bench.results.items():
            if result.get("attn_implementation"):
                attn.setdefault(side, result["attn_implementation"])
    trainable = {
        b.name: {s: r.get("trainable_params") for s, r in b.results.items()}
        for b in benches
        if b.kind in ("fusion_train", "single_train", "real")
    }
    differing = {k: v for k, v in trainable.items() if len(set(v.values())) > 1}
    if trainable:
        notes.append(
            "Trainable parameters per configuration (ours / reference): "
            + "; ".join(f"{k} {v.get(OURS)} / {v.get(REF)}" for k, v in trainable.items())
            + ("" if not differing else f" — differ in {sorted(differing)}")
        )
    meta = {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "argv": "".join(f" {a}" for a in (argv if argv is not None else sys.argv[1:])),
        "wall_s": time.perf_counter() - started,
        "machine": _machine(args.threads),
        "load_before": load_before,
        "load_after": _load(),
        "versions": {OURS: _ours_versions(), REF: refenv.versions(Path(pythons[REF]))},
        "attn": attn,
        "reps": args.reps,
        "budget_s": args.budget,
        "real_skipped": real_skipped,
        "notes": notes,
    }
    text = write_report(benches, meta, md_path, json_path)
    print()
    print(text)
    print(f"written: {md_path.relative_to(ROOT)}, {json_path.relative_to(ROOT)}")
    failed = any("error" in r for b in benches for r in b.results.values())
    return 1 if failed else 0


def rerender(json_path: Path) -> int:
    """Write the Markdown next to `json_path` again from its raw results (no measuring)."""
    payload = json.loads(json_path.read_text())
    benches = suite(quick=False)
    for bench in benches:
        bench.results = payload["raw"].get(bench.name, {})
        bench.load = next((r["load"] for r in payload["timed"] + payload["real_data"]
                           if r["name"] == bench.name), "")  # fmt: skip
    md_path = json_path.with_name("RESULTS.md" if json_path.name == "results.json" else
                                  "RESULTS-partial.md")  # fmt: skip
    print(write_report(benches, payload["meta"], md_path, json_path))
    return 0


if __name__ == "__main__":
    sys.exit(main())
