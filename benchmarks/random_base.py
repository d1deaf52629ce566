"""A random 2-layer BERT of a saved config's width, with its tokenizer: a base that travels.

    python -m benchmarks.random_base CONFIG_AND_TOKENIZER_DIR OUT_DIR [--layers 2]

For `python -m benchmarks.gpu_check --base-model OUT_DIR` on a machine the packaged MiniLM's
weights cannot reach; the accuracies it gives are a random base's, a check that the path runs.
"""

from __future__ import annotations

import argparse
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    from transformers import AutoConfig, AutoModel, AutoTokenizer

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--layers", type=int, default=2)
    args = parser.parse_args(argv)
    config = AutoConfig.from_pretrained(args.source)
    config.num_hidden_layers = args.layers
    AutoModel.from_config(config).save_pretrained(args.out)
    AutoTokenizer.from_pretrained(args.source).save_pretrained(args.out)
    print(f"random base: {args.out} ({args.layers} layers of {config.hidden_size})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
