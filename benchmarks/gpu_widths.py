"""What each new batch width costs a GPU training run: two epochs of ST-A on real RTE, padded.

    python -m benchmarks.gpu_widths [--tokens FILE]

Every setting runs in a fresh process (so no kernel plan is cached from another), two passes
over the same length-grouped batches of 32 RTE examples (the first sees every width anew, the
second none): padded to the longest row as they are, with PyTorch's cuDNN attention switched
off, and padded to a multiple of 8 (what training on a GPU does, `runtime.pad_multiple`), on
random MiniLM- and BERT-base-shaped models under bf16 autocast. Needs a CUDA device, and
../shared/data/glue or the token ids `python -m benchmarks.packing --save-tokens` wrote.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SETTINGS = (  # (shape, pad to a multiple of, cuDNN attention)
    ("minilm", 1, True),
    ("minilm", 1, False),
    ("minilm", 8, True),
    ("bert-base", 1, True),
    ("bert-base", 8, True),
)


def two_epochs(shape: str, multiple: int, cudnn: bool, tokens: Path | None,
               device: str = "cuda", limit: int | None = None) -> dict[str, Any]:  # fmt: skip
    """In this process: seconds of the first and the second pass over the first `limit`
    batches (all by default), and how many widths they have."""
    import torch

    from adapterfleet.data.batching import LengthGroupedBatchSampler, PadCollator
    from benchmarks import packing

    torch.backends.cuda.enable_cudnn_sdp(cudnn)
    split = packing.load_tokens(tokens, "rte") if tokens else packing.tokenized("rte", 2490)
    sampler = LengthGroupedBatchSampler(split.lengths, 32, shuffle=True, seed=0, epoch=0)
    collate = PadCollator(0, multiple, max(split.lengths))
    batches = [collate([split[i] for i in b]) for b in sampler.batches()][:limit]
    model, params = packing.st_a_model(0, shape, 0.0)
    model.to(device)
    optimizer = torch.optim.AdamW(params, lr=1e-4)
    examples = sum(len(b["labels"]) for b in batches)
    # packing's timed pass: the same training step, synchronised at its end on a GPU
    seconds = [round(examples / packing.epoch(model, optimizer, batches, "padded", device), 2)
               for _ in range(2)]  # fmt: skip
    widths = len({b["input_ids"].shape[1] for b in batches})
    return {"shape": shape, "multiple": multiple, "cudnn_attention": cudnn, "widths": widths,
            "batches": len(batches), "first_epoch_s": seconds[0],
            "second_epoch_s": seconds[1]}  # fmt: skip


CHILD = (
    "import json, sys; from pathlib import Path; from benchmarks.gpu_widths import two_epochs; "
    "a = sys.argv[1:]; "
    "print(json.dumps(two_epochs(a[0], int(a[1]), a[2] == 'on', Path(a[3]) if a[3] else None)))"
)


def measure(tokens: Path | None = None) -> list[dict[str, Any]]:
    """Every setting of SETTINGS in a process of its own."""
    rows = []
    for shape, multiple, cudnn in SETTINGS:
        args = [shape, str(multiple), "on" if cudnn else "off", str(tokens or "")]
        done = subprocess.run([sys.executable, "-c", CHILD, *args], cwd=ROOT,
                              capture_output=True, text=True, timeout=600, check=True)  # fmt: skip
        rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
    return rows


def markdown(rows: list[dict[str, Any]]) -> str:
    lines = ["| shape | padded to | cuDNN attention | widths | first epoch s | second epoch s |",
             "|---|---|---|---|---|---|"]  # fmt: skip
    for r in rows:
        padded = "the longest row" if r["multiple"] == 1 else f"a multiple of {r['multiple']}"
        lines.append(f"| {r['shape']} | {padded} | {'on' if r['cudnn_attention'] else 'off'} | "
                     f"{r['widths']} | {r['first_epoch_s']} | {r['second_epoch_s']} |")  # fmt: skip
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=Path, help="token ids from packing --save-tokens")
    args = parser.parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print("gpu_widths: skipped, no CUDA device here")
        return 0
    print(markdown(measure(args.tokens.resolve() if args.tokens else None)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
