"""What both workers share: threads, seeded inputs, the timing loop, the result file.

Imports only the standard library and torch, so it runs in the project's venv and in the
reference's venv alike (neither side imports the other's library).
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import functools
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any


def set_threads(threads: int) -> None:
    import torch

    torch.set_num_threads(threads)
    torch.set_num_interop_threads(1)


def rss_mb() -> float:
    """Current resident set size of this process, MiB (Linux)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


@functools.cache
def _libc_trim() -> Callable[[int], int] | None:
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
    except (OSError, AttributeError):  # no glibc (musl, macOS): nothing to call
        return None


def malloc_trim() -> bool:
    """Give the heap's free pages back to the system (glibc's `malloc_trim(0)`); False where the
    C library has no such call."""
    trim = _libc_trim()
    if trim is None:
        return False
    trim(0)
    return True


def place(spec: dict, model, batch: dict) -> tuple[Any, dict]:
    """Model and batch on the spec's `device` (default cpu)."""
    import torch

    device = torch.device(spec.get("device", "cpu"))
    return model.to(device), {k: v.to(device) for k, v in batch.items()}


def autocast(spec: dict, cache: bool = True) -> contextlib.AbstractContextManager:
    """`torch.autocast` in the spec's `autocast` dtype (bf16, fp16) on its device, or nothing;
    `cache=False` casts weights at every use (a CUDA graph capture needs that)."""
    import torch

    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(spec.get("autocast") or "")
    if dtype is None:
        return contextlib.nullcontext()
    device = torch.device(spec.get("device", "cpu")).type
    return torch.autocast(device, dtype=dtype, cache_enabled=cache)


def synced(spec: dict, step: Callable[[], Any]) -> Callable[[], None]:
    """`step`, then a wait for the GPU, so that wall-clock timings hold the device's work."""
    import torch

    if torch.device(spec.get("device", "cpu")).type != "cuda":
        return step

    def synced_step() -> None:
        step()
        torch.cuda.synchronize()

    return synced_step


def gpu_peak_mb(spec: dict) -> float | None:
    """Peak GPU memory torch allocated in this process, MiB; None off the GPU."""
    import torch

    if torch.device(spec.get("device", "cpu")).type != "cuda":
        return None
    return torch.cuda.max_memory_allocated() / 2**20


def random_batch(seed: int, batch: int, seq: int, vocab: int, num_labels: int = 2) -> dict:
    """Seeded random token ids (CLS first, SEP last), a full attention mask, zero token types."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(1000, vocab, (batch, seq), generator=gen)
    ids[:, 0], ids[:, -1] = 101, 102
    return {
        "input_ids": ids,
        "attention_mask": torch.ones(batch, seq, dtype=torch.long),
        "token_type_ids": torch.zeros(batch, seq, dtype=torch.long),
        "labels": torch.randint(0, num_labels, (batch,), generator=gen),
    }


def time_steps(
    step: Callable[[], Any], warmup: int, reps: int | None, budget_s: float, min_reps: int = 3
) -> tuple[list[float], list[float]]:
    """Run `warmup` untimed steps, then timed ones: exactly `reps` of them when given, else at
    least `min_reps` and more (up to 9) while the timed total stays under `budget_s`.

    Returns (wall seconds, process CPU seconds) per timed step; CPU time (all threads) is less
    sensitive than wall time to other work on a shared machine."""
    for _ in range(warmup):
        step()
    times: list[float] = []
    cpu: list[float] = []
    while True:
        start, start_cpu = time.perf_counter(), time.process_time()
        step()
        times.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
        if reps is not None:
            if len(times) >= reps:
                break
        elif len(times) >= min_reps and (
            sum(times) * (1 + 1 / len(times)) > budget_s or len(times) >= 9
        ):
            break
    return times, cpu


def alternate(
    first: Callable[[], Any], second: Callable[[], Any], steps: int, warmup: int = 2
) -> tuple[float, float]:
    """Median wall seconds of two forms of one step, in turn ABBA after `warmup` untimed steps of
    each, so that drift in the machine's load falls on both alike."""
    for _ in range(warmup):
        first()
        second()
    times: tuple[list[float], list[float]] = ([], [])
    for index in range(steps):
        for which in (0, 1) if index % 2 == 0 else (1, 0):
            start = time.perf_counter()
            (first, second)[which]()
            times[which].append(time.perf_counter() - start)
    return statistics.median(times[0]), statistics.median(times[1])


def seconds_in(modules: list, step: Callable[[], Any], steps: int = 3) -> float:
    """Seconds per step spent in the forward of `modules` (hooks), over `steps` after one warm
    step."""
    spent = [0.0]
    started: list[float] = []
    hooks = [m.register_forward_pre_hook(lambda *_: started.append(time.perf_counter()))
             for m in modules]  # fmt: skip
    hooks += [m.register_forward_hook(lambda *_: spent.__setitem__(
        0, spent[0] + time.perf_counter() - started.pop())) for m in modules]  # fmt: skip
    step()
    spent[0] = 0.0
    for _ in range(steps):
        step()
    for hook in hooks:
        hook.remove()
    return spent[0] / steps


def against_original(
    step: Callable[[], Any],
    original: Callable[[], contextlib.AbstractContextManager],
    modules: list,
    steps: int,
) -> tuple[float, float, float, float]:
    """A step against itself inside `original()` (a context that puts back the original form):
    the seconds per step in `modules`' forward, original then ours, and the whole steps' medians
    alternating ABBA, original then ours."""

    def original_step() -> None:
        with original():
            step()

    with original():
        original_in = seconds_in(modules, step)
    ours_in = seconds_in(modules, step)
    return (original_in, ours_in, *alternate(original_step, step, steps))


def step_table(result: dict[str, Any], columns: list[tuple[str, str, str]]) -> str:
    """The Markdown table of a two-form script: a row per step, `columns` as (header, key,
    format), then the load average."""
    header = "| step | batch | " + " | ".join(title for title, _, _ in columns) + " |"
    lines = [header, "|---|---|" + "---|" * len(columns)]
    for row in result["rows"]:
        cells = " ".join(f"{row[key]:{form}} |" for _, key, form in columns)
        lines.append(f"{step_cells(row)} {cells}")
    return "\n".join(lines) + f"\n\nLoad average before: {result['load_before']}.\n"


def step_cells(row: dict) -> str:
    """The first two cells of a table row for one timed step: `| kind N=n shape | batch×seq |`."""
    batch = "×".join(str(x) for x in row["batch"])
    return f"| {row['kind']} N={row['n']} {row['shape']} | {batch} |"


def timed_cases(
    time_case: Callable[..., dict], cases, steps: int, seq: int, out: Path, name: str
) -> dict[str, Any]:
    """Each case of a two-form script timed by `time_case(*case, seq=, steps=, out=)`, with the
    load average before; written to OUT/NAME.json."""
    import os

    out.mkdir(parents=True, exist_ok=True)
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    rows = [time_case(*case, seq=seq, steps=steps, out=out) for case in cases]
    result = {"steps": steps, "load_before": load, "rows": rows}
    (out / f"{name}.json").write_text(json.dumps(result, indent=1))
    return result


def step_table_main(
    doc: str,
    measure: Callable[[int, Path], dict],
    markdown: Callable[[dict], str],
    steps: int,
    out: Path,
    argv: list[str] | None = None,
) -> int:
    """The command line of a script timing the steps of `make bench` in two forms (`--steps`,
    `--out`): two threads, no progress bars from transformers, the table printed."""
    import argparse

    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--steps", type=int, default=steps)
    parser.add_argument("--out", type=Path, default=out)
    args = parser.parse_args(argv)
    set_threads(2)
    with contextlib.suppress(ImportError):  # a bar per loaded base is noise beside the table
        from transformers.utils import logging

        logging.disable_progress_bar()
    print(markdown(measure(args.steps, args.out)))
    return 0


def main(run: Callable[[dict], dict]) -> None:
    """Worker entry: `python -m benchmarks.<worker> SPEC.json OUT.json`."""
    spec = json.loads(Path(sys.argv[1]).read_text())
    set_threads(int(spec.get("threads", 2)))
    start = time.perf_counter()
    result = run(spec)
    result["worker_seconds"] = time.perf_counter() - start
    Path(sys.argv[2]).write_text(json.dumps(result, indent=1))
