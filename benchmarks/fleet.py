"""A fleet of hundreds: how the driver, the registry and `status` grow with the number of tasks, and
how a fusion's memory grows with the number of adapters.

    python -m benchmarks.fleet                        # both parts (about 45 min on 2 cores)
    python -m benchmarks.fleet --only fleet --tasks 25 50 100 200
    python -m benchmarks.fleet --only memory --sizes 8 16 32 64
    python -m benchmarks.fleet --quick                # smoke test: 3 tasks, N = 2 and 4
    python -m benchmarks.fleet --status-again --build-missing --keep .bench/fleet-keep --tasks 200
                                                      # only `status` again, at 400 trials

Fleet: for each task count, generated two-label keyword tasks (32 train / 16 dev rows each) and a
random 2-layer BERT (hidden 32) with the packaged MiniLM tokenizer; `adapterfleet run` in a fresh
process (its own local Ray with 2 CPUs, a SQLite MLflow store), 2 reduction factors per task, one
epoch, no fusion. From MLflow: the trials' run times; the driver's overhead per trial is
(wall − Σ trial times / 2 slots) / trials. Then `adapterfleet status -c CONFIG` in a fresh
process and `pipeline_status` in this one (best of 3 each). The registry: in this process, per
adapter, log a 442 KiB safetensors file (a pfeiffer rf 16 adapter of MiniLM) to a new run,
register it with the `best` alias, and pull it back sha256-verified, against a SQLite store and
against a real `mlflow server` (SQLite behind it), as many adapters as tasks.

Memory: one fusion training step (MiniLM shape, random weights, 8×128 tokens) over N adapters,
peak RSS of a fresh process, ours and the reference (AdapterHub adapters, its own venv).

Writes benchmarks/fleet.json, fleet.png, fleet-memory.png and the block between the `fleet`
markers in benchmarks/RESULTS.md (`--quick`: .bench/fleet-partial.json only).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
WORK = ROOT / ".bench"
SLOTS = 2
BEGIN, END = "<!-- fleet:begin -->", "<!-- fleet:end -->"
WORDS = [f"w{i}" for i in range(400)]  # ids from the tokenizer's word pieces: plain ascii words
FILLER = ["the", "a", "small", "big", "red", "blue", "old", "new", "green", "fast"]


# --------------------------------------------------------------------------- the fleet


def make_tiny_model(folder: Path) -> Path:
    """A random BertModel (hidden 32, 2 layers) saved with the packaged MiniLM tokenizer."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertModel

    from adapterfleet.adapters.base_model import packaged_minilm_path

    if (folder / "config.json").is_file():
        return folder
    tokenizer = AutoTokenizer.from_pretrained(str(packaged_minilm_path()), local_files_only=True)
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=64, max_position_embeddings=64, initializer_range=0.2,
    )  # fmt: skip
    BertModel(config, add_pooling_layer=False).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def write_fleet(folder: Path, tasks: int, model: Path, configs: int) -> Path:
    """`tasks` keyword tasks (is one of the task's 5 words in the sentence?) and the pipeline."""
    rng = random.Random(tasks)
    data = folder / "data"
    data.mkdir(parents=True, exist_ok=True)
    declared = {}
    for index in range(tasks):
        name = f"t{index:03d}"
        keywords = rng.sample(WORDS, 5)
        for split, count in (("train", 32), ("dev", 16)):
            rows = []
            for row in range(count):
                words = rng.sample(FILLER, 4)
                if row % 2 == 0:
                    words.insert(rng.randrange(5), rng.choice(keywords))
                rows.append(f"{' '.join(words)}\t{'yes' if row % 2 == 0 else 'no'}")
            (data / f"{name}_{split}.tsv").write_text("text\tlabel\n" + "\n".join(rows) + "\n")
        declared[name] = {
            "train": f"{name}_train.tsv", "dev": f"{name}_dev.tsv", "text_fields": ["text"],
            "label_field": "label", "label_names": ["no", "yes"],
        }  # fmt: skip
    config = {
        "name": f"fleet-{tasks}",
        "base_model": str(model),
        "max_length": 32,
        "storage": str(folder / "runs"),
        "tracking_uri": f"sqlite:///{folder / 'mlflow.db'}",
        "data_root": str(data),
        "tasks": declared,
        "adapters": {
            "reduction_factors": [4, 8, 16][:configs],
            "learning_rates": [1e-2],
            "training": {"learning_rate": 1e-2, "max_epochs": 1, "batch_size": 16, "device": "cpu"},
        },  # fmt: skip
        "resources": {"cpu": 1},
    }
    path = folder / "pipeline.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def _env() -> dict[str, str]:
    return dict(
        os.environ, TOKENIZERS_PARALLELISM="false", HF_HUB_OFFLINE="1", PYTHONWARNINGS="ignore",
        MLFLOW_DISABLE_TELEMETRY="true",
    )  # fmt: skip


def _cli(*args: str) -> list[str]:
    return [str(Path(sys.executable).parent / "adapterfleet"), *args]


def build_fleet(folder: Path, tasks: int, configs: int, model: Path) -> tuple[Path, float, str]:
    """Write the fleet's tasks and config and run the pipeline in a fresh process: (config,
    start time, error or '')."""
    config = write_fleet(folder, tasks, model, configs)
    started = time.time()
    done = subprocess.run(
        _cli("run", str(config), "--num-cpus", str(SLOTS)),
        cwd=ROOT, env=_env(), capture_output=True, text=True,
    )  # fmt: skip
    (folder / "pipeline.log").write_text(done.stdout + done.stderr)
    if done.returncode != 0:
        tail = (done.stdout + done.stderr).strip().splitlines()[-8:]
        return config, started, f"exit {done.returncode}: " + " | ".join(tail)
    return config, started, ""


def run_fleet(folder: Path, tasks: int, configs: int, model: Path) -> dict[str, Any]:
    config, started, error = build_fleet(folder, tasks, configs, model)
    wall = time.time() - started
    if error:
        return {"tasks": tasks, "error": error}
    uri = f"sqlite:///{folder / 'mlflow.db'}"
    figures = _trial_figures(uri, f"fleet-{tasks}", started, wall)
    return {"tasks": tasks, "configs": configs, **figures, **_status_times(config)}


def _trial_figures(uri: str, name: str, started: float, wall: float) -> dict[str, Any]:
    from mlflow import MlflowClient

    from adapterfleet.registry.tags import TAG_KIND

    client = MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name(name)
    runs, token = [], None
    while True:
        page = client.search_runs(
            [experiment.experiment_id], f"tags.`{TAG_KIND}` = 'trial'", max_results=1000,
            page_token=token,
        )  # fmt: skip
        runs.extend(page)
        token = page.token
        if not token:
            break
    durations = [(r.info.end_time - r.info.start_time) / 1000.0 for r in runs if r.info.end_time]
    first = min(r.info.start_time for r in runs) / 1000.0
    last = max(r.info.end_time or 0 for r in runs) / 1000.0
    ideal = sum(durations) / SLOTS
    versions = client.search_model_versions(f"name LIKE '{name}.adapter.%'", max_results=10000)
    return {
        "trials": len(runs),
        "finished": sum(r.info.status == "FINISHED" for r in runs),
        "registered": len(versions),
        "wall_s": round(wall, 1),
        "start_up_s": round(first - started, 1),
        "trial_mean_s": round(statistics.mean(durations), 2),
        "ideal_s": round(ideal, 1),
        "after_last_trial_s": round(started + wall - last, 1),
        "overhead_per_trial_s": round((wall - ideal) / len(runs), 3),
        "overhead_per_trial_in_sweep_s": round((last - first - ideal) / len(runs), 3),
    }


def _best_of(count: int, fn: Any) -> float:
    best = float("inf")
    for _ in range(count):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return round(best, 3)


def _status_times(config: Path) -> dict[str, Any]:
    from adapterfleet.config import load_config
    from adapterfleet.results.status import pipeline_status

    def cli() -> None:
        subprocess.run(_cli("status", "-c", str(config)), cwd=ROOT, env=_env(),
                       capture_output=True, check=True)  # fmt: skip

    loaded = load_config(config)
    store_uri = loaded.tracking_uri
    status = pipeline_status(loaded, store_uri)
    with MlflowServer(config.parent / "status-server", backend=config.parent / "mlflow.db") as uri:

        def cli_server() -> None:
            subprocess.run(_cli("status", loaded.name, "--tracking-uri", uri), cwd=ROOT,
                           env=_env(), capture_output=True, check=True)  # fmt: skip

        server_s = _best_of(3, cli_server)
    return {
        "status_cli_s": _best_of(3, cli),
        "status_call_s": _best_of(3, lambda: pipeline_status(loaded, store_uri)),
        "status_server_cli_s": server_s,
        "status_trials_seen": sum(t.done + t.running + t.failed for t in status.tasks),
    }


# --------------------------------------------------------------------------- the registry


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class MlflowServer:
    """A real `mlflow server` (SQLite behind it) on a free loopback port, stopped on exit."""

    def __init__(self, root: Path, backend: Path | None = None) -> None:
        self.root, self.port = root, _free_port()
        self.backend = backend or root / "server.db"
        self.uri = f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> str:
        self.root.mkdir(parents=True, exist_ok=True)
        command = [
            str(Path(sys.executable).parent / "mlflow"), "server", "--host", "127.0.0.1",
            "--port", str(self.port), "--workers", "1",
            "--backend-store-uri", f"sqlite:///{self.backend}",
            "--artifacts-destination", str(self.root / "artifacts"),
        ]  # fmt: skip
        env = dict(_env(), MLFLOW_SERVER_ENABLE_JOB_EXECUTION="false")
        self.log = open(self.root / "server.log", "wb")  # noqa: SIM115 - closed in __exit__
        self.proc = subprocess.Popen(
            command, stdout=self.log, stderr=subprocess.STDOUT, env=env, cwd=self.root,
            start_new_session=True,
        )  # fmt: skip
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"mlflow server exited: see {self.root / 'server.log'}")
            try:
                with urllib.request.urlopen(f"{self.uri}/health", timeout=1) as response:
                    if response.status == 200:
                        return self.uri
            except OSError:
                time.sleep(0.25)
        raise RuntimeError("mlflow server not healthy after 90 s")

    def __exit__(self, *exc: object) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)  # the group this process started
            self.proc.wait(timeout=10)
        self.log.close()


def registry_cost(uri: str, adapters: int, folder: Path) -> dict[str, Any]:
    """Per adapter: log the weights to a new run + register with `best`; pull back verified."""
    import torch
    from safetensors.torch import save_file

    from adapterfleet.registry import (
        ensure_experiment,
        list_models,
        open_trial_run,
        pull,
        register_version,
    )

    weights = folder / "adapter"
    weights.mkdir(parents=True, exist_ok=True)
    save_file({"down": torch.randn(6, 384, 24), "up": torch.randn(6, 24, 384),
               "bias": torch.randn(6, 408)}, weights / "adapter.safetensors")  # fmt: skip
    experiment = ensure_experiment(uri, "fleet-registry")
    register_s, pull_s = [], []
    for index in range(adapters):
        name = f"fleet-registry.adapter.t{index:03d}"
        start = time.perf_counter()
        logger = open_trial_run(uri, experiment, None, f"trial-{index}")
        logger.log_artifacts(weights, "adapter")
        register_version(uri, name, logger.run_id, "adapter", weights / "adapter.safetensors")
        logger.end("FINISHED")
        register_s.append(time.perf_counter() - start)
        start = time.perf_counter()
        pull(uri, name, folder / "pulled" / name)
        pull_s.append(time.perf_counter() - start)
    start = time.perf_counter()
    listed = list_models(uri, "fleet-registry", "adapter")
    list_s = time.perf_counter() - start
    assert len(listed) == adapters, (len(listed), adapters)
    return {
        "adapters": adapters,
        "register_ms": round(1000 * statistics.median(register_s), 1),
        "register_last10_ms": round(1000 * statistics.median(register_s[-10:]), 1),
        "pull_ms": round(1000 * statistics.median(pull_s), 1),
        "list_all_ms": round(1000 * list_s, 1),
    }


# --------------------------------------------------------------------------- fusion memory


def fusion_memory(sizes: list[int], folder: Path, quick: bool) -> list[dict[str, Any]]:
    from benchmarks import refenv
    from benchmarks.run import OURS, REF, make_base, run_worker

    pythons = {OURS: sys.executable, REF: str(refenv.ensure_ref_venv())}
    base = make_base("minilm", folder)
    rows = []
    for n in sizes:
        row: dict[str, Any] = {"n": n}
        for side in (OURS, REF):
            spec = {"kind": "fusion_train", "shape": "minilm", "n": n, "batch": 8, "seq": 128,
                    "lr": 5e-5, "seed": 0, "base_dir": str(base), "warmup": 1, "reps": 1 if quick
                    else 2, "budget_s": 60, "threads": 2}  # fmt: skip
            result = run_worker(pythons[side], side, spec, folder / f"mem-n{n}", 2)
            row[side] = (
                {"error": result["error"][-300:]}
                if "error" in result
                else {
                    "peak_rss_mb": round(result["max_rss_mb"]),
                    "step_s": round(min(result["times"]), 3),
                }  # fmt: skip
            )
            print(f"  memory N={n} {side}: {row[side]}", flush=True)
        rows.append(row)
    return rows


def _slope(rows: list[dict[str, Any]], side: str) -> float | None:
    points = [(r["n"], r[side]["peak_rss_mb"]) for r in rows if "peak_rss_mb" in r.get(side, {})]
    if len(points) < 2:
        return None
    mean_n = statistics.mean(n for n, _ in points)
    mean_m = statistics.mean(m for _, m in points)
    num = sum((n - mean_n) * (m - mean_m) for n, m in points)
    den = sum((n - mean_n) ** 2 for n, _ in points)
    return round(num / den, 2)


# --------------------------------------------------------------------------- report


def plot_fleet(fleet: list[dict], registry: dict[str, list[dict]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    ok = [r for r in fleet if "error" not in r]
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.6))
    tasks = [r["tasks"] for r in ok]
    axes[0].plot(tasks, [r["overhead_per_trial_s"] for r in ok], marker="o", label="whole run")
    axes[0].plot(tasks, [r["overhead_per_trial_in_sweep_s"] for r in ok], marker="o",
                 label="within the sweep")  # fmt: skip
    axes[0].set_ylabel("driver overhead per trial, s")
    axes[1].plot(tasks, [r["status_cli_s"] for r in ok], marker="o", label="status, SQLite")
    axes[1].plot(tasks, [r.get("status_server_cli_s") for r in ok], marker="o",
                 label="status, mlflow server")  # fmt: skip
    axes[1].plot(tasks, [r["status_call_s"] for r in ok], marker="o", label="pipeline_status()")
    axes[1].axhline(2.0, color="grey", linestyle="--", linewidth=1, label="target 2 s")
    axes[1].set_ylabel("wall time, s")
    for store, rows in registry.items():
        n = [r["adapters"] for r in rows if "error" not in r]
        axes[2].plot(n, [r["register_ms"] for r in rows if "error" not in r], marker="o",
                     label=f"register, {store}")  # fmt: skip
        axes[2].plot(n, [r["pull_ms"] for r in rows if "error" not in r], marker="s",
                     linestyle=":", label=f"pull, {store}")  # fmt: skip
    axes[2].set_ylabel("ms per adapter (median)")
    for axis in axes:
        axis.set_xlabel("tasks (2 configurations each)")
        axis.grid(alpha=0.3)
        axis.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_memory(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    fig, axis = plt.subplots(figsize=(5.5, 3.6))
    for side, label in (("ours", "adapterfleet"), ("reference", "AdapterHub adapters")):
        points = [(r["n"], r[side]["peak_rss_mb"]) for r in rows if "peak_rss_mb" in r[side]]
        axis.plot(*zip(*points, strict=True), marker="o", label=label)
    axis.set_xlabel("adapters fused (N)")
    axis.set_ylabel("peak RSS, MiB")
    axis.set_xticks([r["n"] for r in rows])
    axis.grid(alpha=0.3)
    axis.legend()
    axis.set_title("fusion training step, MiniLM shape, 8×128", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def markdown(payload: dict[str, Any]) -> str:
    m = payload["meta"]
    lines = [BEGIN, "## A fleet of hundreds", ""]
    for part in ("fleet", "memory"):
        if part in m:
            lines.append(
                f"- {part}: `python -m benchmarks.fleet{m[part]['argv']}` on {m[part]['date']} "
                f"({m[part]['wall_s'] / 60:.0f} min for the whole command; load average "
                f"{m[part]['load_before']} before, {m[part]['load_after']} after; 2 cores)."
            )
    fleet = payload.get("fleet") or []
    if fleet:
        lines += [
            "",
            "**The pipeline at scale** (`adapterfleet run`, local Ray with 2 CPUs, SQLite MLflow; "
            "generated keyword tasks of 32 training rows, a random 2-layer BERT of hidden 32 "
            "with the MiniLM tokenizer, 2 reduction factors per task, 1 epoch, no fusion). "
            "Overhead per trial = (wall − Σ trial times / 2) / trials; *within the sweep* counts "
            "from the first trial's start to the last one's end. `status` is the command "
            "`adapterfleet status` in a fresh process (best of 3), on the SQLite store "
            "(`-c CONFIG`) and through a real `mlflow server` on that store (`status NAME "
            "--tracking-uri http://...`); `pipeline_status()` is the call in a warm process."
            + (f" Status timed again on {m['status_again']}." if m.get("status_again") else ""),
            "",
            "| tasks | trials | registered | wall s | start-up s | mean trial s | overhead/trial s "
            "| within sweep s | `status` s, SQLite | `status` s, server | `pipeline_status()` s |",
            "|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for r in fleet:
            if "error" in r:
                lines.append(f"| {r['tasks']} | failed: {r['error'][:200]} |")
                continue
            lines.append(
                f"| {r['tasks']} | {r['trials']} | {r['registered']} | {r['wall_s']} | "
                f"{r['start_up_s']} | {r['trial_mean_s']} | {r['overhead_per_trial_s']} | "
                f"{r['overhead_per_trial_in_sweep_s']} | {r['status_cli_s']} | "
                f"{r.get('status_server_cli_s', '–')} | {r['status_call_s']} |"
            )
    registry = payload.get("registry") or {}
    if registry:
        lines += [
            "",
            "**The registry per adapter** (in one process: log a 442 KiB safetensors file to a "
            "new run, register it with the `best` alias, pull it back sha256-verified; medians; "
            "`list` is one `list_models` over all of them). `server` is a real `mlflow server` "
            "with SQLite behind it on loopback.",
            "",
            "| store | adapters | register ms | register ms (last 10) | pull ms | list all ms |",
            "|---|---|---|---|---|---|",
        ]
        for store, rows in registry.items():
            for r in rows:
                if "error" in r:
                    lines.append(f"| {store} | {r['adapters']} | failed: {r['error'][:200]} |")
                    continue
                lines.append(
                    f"| {store} | {r['adapters']} | {r['register_ms']} | "
                    f"{r['register_last10_ms']} | {r['pull_ms']} | {r['list_all_ms']} |"
                )
    if fleet or registry:
        lines += ["", "![fleet](fleet.png)"]
    memory = payload.get("memory") or []
    if memory:
        slopes = payload["memory_slope_mb"]
        lines += [
            "",
            "**Fusion memory against N** (one fusion training step, MiniLM shape with random "
            "weights, 8×128 tokens, pfeiffer rf 16 adapters; peak RSS of a fresh process; "
            "`python -m benchmarks.fleet --only memory`).",
            "",
            "| N | ours MiB | reference MiB | ratio | ours s/step | reference s/step |",
            "|---|---|---|---|---|---|",
        ]
        for r in memory:
            ours, ref = r["ours"], r["reference"]
            ratio = (
                f"{ref['peak_rss_mb'] / ours['peak_rss_mb']:.2f}×"
                if "peak_rss_mb" in ours and "peak_rss_mb" in ref
                else "–"
            )
            lines.append(
                f"| {r['n']} | {ours.get('peak_rss_mb', ours.get('error', ''))} | "
                f"{ref.get('peak_rss_mb', ref.get('error', ''))} | {ratio} | "
                f"{ours.get('step_s', '')} | {ref.get('step_s', '')} |"
            )
        p = payload["memory_predicted_mb"]
        lines += [
            "",
            f"Growth per added adapter (least squares over N): ours **{slopes['ours']} MiB**, "
            f"the reference **{slopes['reference']} MiB**. For scale: one tensor per adapter "
            f"over the 6 layers is {p['bottleneck']} MiB at the bottleneck width (24) and "
            f"{p['hidden']} MiB at the hidden width (384) for 8×128 tokens in float32.",
            "",
            "![fusion memory](fleet-memory.png)",
        ]
    lines.append(END)
    return "\n".join(lines) + "\n"


def write_block(md_path: Path, block: str) -> None:
    """Replace the text between the fleet markers in `md_path` (or append it)."""
    text = md_path.read_text() if md_path.is_file() else ""
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        tail = rest.split(END, 1)[1].lstrip("\n")
        text = head + block + ("\n" + tail if tail else "")
    else:
        text = text.rstrip("\n") + "\n\n" + block
    md_path.write_text(text)


def _load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, nargs="+", default=[25, 50, 100, 200])
    parser.add_argument("--configs", type=int, default=2, help="reduction factors per task")
    parser.add_argument("--sizes", type=int, nargs="+", default=[8, 16, 32, 64])
    parser.add_argument("--only", choices=["fleet", "memory"])
    parser.add_argument("--quick", action="store_true", help="3 tasks; N = 2, 4")
    parser.add_argument("--keep", type=Path, help="keep the generated runs in this folder")
    parser.add_argument(
        "--status-again",
        action="store_true",
        help="only time `status` again on the fleets of --tasks kept in --keep (after a change "
        "to it); the other figures of the table stay as they were",
    )
    parser.add_argument(
        "--build-missing",
        action="store_true",
        help="with --status-again: first build (`adapterfleet run`) the fleets of --tasks that "
        "--keep does not hold; their run figures are not replaced",
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.tasks, args.sizes = [3], [2, 4]
    started, load_before = time.perf_counter(), _load()
    WORK.mkdir(exist_ok=True)
    folder = (args.keep or Path(tempfile.mkdtemp(prefix="fleet-", dir=WORK))).resolve()
    folder.mkdir(parents=True, exist_ok=True)
    json_path = WORK / "fleet-partial.json" if args.quick else HERE / "fleet.json"
    payload: dict[str, Any] = json.loads(json_path.read_text()) if json_path.is_file() else {}
    retimed: list[str] = []
    if args.status_again:
        for row in payload.get("fleet", []):
            config = folder / f"fleet-{row['tasks']}" / "pipeline.yaml"
            if args.build_missing and row["tasks"] in args.tasks and not config.is_file():
                print(f"  building the {row['tasks']}-task fleet ...", flush=True)
                model = make_tiny_model(folder / "tiny-bert")
                _, _, error = build_fleet(config.parent, row["tasks"], row["configs"], model)
                if error:
                    raise SystemExit(f"building the {row['tasks']}-task fleet failed: {error}")
            if "error" not in row and row["tasks"] in args.tasks and config.is_file():
                row.update(_status_times(config))
                retimed.append(str(row["tasks"]))
                print(f"  status at {row['tasks']} tasks: {row}", flush=True)
    elif args.only != "memory":
        model = make_tiny_model(folder / "tiny-bert")
        payload["fleet"], payload["registry"] = [], {"sqlite": [], "server": []}
        for tasks in args.tasks:
            print(f"fleet: {tasks} tasks × {args.configs} configurations ...", flush=True)
            row = run_fleet(folder / f"fleet-{tasks}", tasks, args.configs, model)
            print(f"  {row}", flush=True)
            payload["fleet"].append(row)
            sqlite = f"sqlite:///{folder / f'registry-{tasks}.db'}"
            payload["registry"]["sqlite"].append(
                registry_cost(sqlite, tasks, folder / f"registry-{tasks}")
            )
            with MlflowServer(folder / f"server-{tasks}") as uri:
                payload["registry"]["server"].append(
                    registry_cost(uri, tasks, folder / f"registry-server-{tasks}")
                )
            print(f"  registry: {[rows[-1] for rows in payload['registry'].values()]}", flush=True)
    if args.only != "fleet" and not args.status_again:
        print(f"fusion memory: N = {args.sizes} ...", flush=True)
        payload["memory"] = fusion_memory(args.sizes, folder, args.quick)
        payload["memory_slope_mb"] = {
            s: _slope(payload["memory"], s) for s in ("ours", "reference")
        }
        per_tensor = 8 * 128 * 6 * 4 / 2**20
        payload["memory_predicted_mb"] = {
            "bottleneck": round(per_tensor * 24, 2), "hidden": round(per_tensor * 384, 2),
        }  # fmt: skip
    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    meta = payload.setdefault("meta", {})
    if args.status_again:
        meta["status_again"] = (
            f"{now} at {', '.join(retimed)} tasks (load {load_before} → {_load()})"
        )
    else:
        for part in ("fleet", "memory"):
            if args.only in (None, part):
                meta[part] = _meta(argv, now, started, load_before)
    json_path.write_text(json.dumps(payload, indent=1) + "\n")
    if not args.quick:
        if payload.get("fleet"):
            plot_fleet(payload["fleet"], payload["registry"], HERE / "fleet.png")
        if payload.get("memory"):
            plot_memory(payload["memory"], HERE / "fleet-memory.png")
        write_block(HERE / "RESULTS.md", markdown(payload))
    print(markdown(payload))
    print(f"written: {json_path}")
    return 0


def _meta(argv: list[str] | None, now: str, started: float, load_before: str) -> dict[str, Any]:
    return {
        "date": now,
        "argv": "".join(f" {a}" for a in (argv if argv is not None else sys.argv[1:])),
        "wall_s": time.perf_counter() - started,
        "load_before": load_before,
        "load_after": _load(),
    }


if __name__ == "__main__":
    sys.exit(main())
