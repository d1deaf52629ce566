# On a GPU machine with torch but no package index, in the project's root, after
# `python -m benchmarks.gpu_bundle` made .gpu/ here and it travelled:
#     bash benchmarks/gpu_remote.sh cuda-tests pipeline predict
# unpacks the stack, makes a random base of MiniLM's width and runs those gpu_check steps.
# Writes the report under $OUT (or .bench/gpu-check).
set -o pipefail
export PYTHONUNBUFFERED=1
PY=${PY:-python3}
OUT=${OUT:-.bench}
site=${SITE:-/tmp/site}
mkdir -p "$site" /tmp/bin && tar xJf .gpu/stack.tar.xz -C "$site" || exit 1
export PYTHONPATH="$site:$PWD/src:$PWD"
printf '#!/bin/sh\nexec %s -c "import sys; sys.argv[0] = \\"adapterfleet\\"; from adapterfleet.cli.app import main; main()" "$@"\n' "$PY" >/tmp/bin/adapterfleet
chmod +x /tmp/bin/adapterfleet
export PATH="/tmp/bin:$PATH"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
$PY -c "import torch, transformers, ray, mlflow; print('torch', torch.__version__, 'transformers', transformers.__version__, 'ray', ray.__version__, 'mlflow', mlflow.__version__)"
$PY -m benchmarks.random_base .gpu/minilm /tmp/base || exit 1
$PY -m benchmarks.gpu_check --base-model /tmp/base --out "$OUT/gpu-check" --only "$@" 2>&1 | tee "$OUT/gpu-check.log"
