# On a GPU machine with torch but no package index, in the project's root, after
# `python -m benchmarks.gpu_bundle` made .gpu/ here and it travelled:
#     bash benchmarks/gpu_remote.sh cuda-tests pipeline predict
# unpacks the stack, makes a random base of MiniLM's width and runs those gpu_check steps. Where
# `gpu_bundle --reference` put the reference's wheels in .gpu/ref, they are installed apart from
# ours (/tmp/ref) for the `versus` step.
# Writes the report under $OUT (or .bench/gpu-check).
set -o pipefail
export PYTHONUNBUFFERED=1
PY=${PY:-python3}
OUT=${OUT:-.bench}
site=${SITE:-/tmp/site}
mkdir -p "$site" /tmp/bin "$OUT" && tar xJf .gpu/stack.tar.xz -C "$site" || exit 1
export PYTHONPATH="$site:$PWD/src:$PWD"
printf '#!/bin/sh\nexec %s -c "import sys; sys.argv[0] = \\"adapterfleet\\"; from adapterfleet.cli.app import main; main()" "$@"\n' "$PY" >/tmp/bin/adapterfleet
chmod +x /tmp/bin/adapterfleet
export PATH="/tmp/bin:$PATH"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
if ls .gpu/ref/*.whl >/dev/null 2>&1; then
    $PY -m pip install -q --no-index --no-deps --no-compile --target /tmp/ref .gpu/ref/*.whl || exit 1
    printf '#!/bin/sh\nPYTHONPATH=/tmp/ref exec %s "$@"\n' "$PY" >/tmp/bin/ref-python
    chmod +x /tmp/bin/ref-python
    export ADAPTERFLEET_BENCH_REF_PYTHON=/tmp/bin/ref-python
    /tmp/bin/ref-python -c "import adapters, transformers; print('reference: adapters', adapters.__version__, 'transformers', transformers.__version__)"
fi
$PY -c "import torch, transformers, ray, mlflow; print('torch', torch.__version__, 'transformers', transformers.__version__, 'ray', ray.__version__, 'mlflow', mlflow.__version__)"
$PY -m benchmarks.random_base .gpu/minilm /tmp/base || exit 1
$PY -m benchmarks.gpu_check --base-model /tmp/base --out "$OUT/gpu-check" --only "$@" 2>&1 | tee "$OUT/gpu-check.log"
