#!/usr/bin/env bash
# Dev accuracies on real GLUE data (../shared/data/glue) with the MiniLM encoder, on a CPU budget:
# ST-A adapters for five tasks (the three large source tasks subsampled), then head-only, ST-A and
# a fusion over all five adapters on the two small targets RTE and MRPC. Prints a Markdown table.
# Usage: scripts/glue_figures.sh [OUT_DIR]   (about 75 min on 2 quiet cores, plus 50 min for the
# three source adapters; runs that have a run.json are kept, so an interrupted run resumes)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-adapterfleet-runs/glue-figures}
af=".venv/bin/adapterfleet"
cfg=configs/glue.yaml
sub=(-o tasks.sst2.max_train_examples=3000 -o tasks.mnli.max_train_examples=3000
     -o tasks.qqp.max_train_examples=3000 -o tasks.sst2.max_dev_examples=872
     -o tasks.mnli.max_dev_examples=1000 -o tasks.qqp.max_dev_examples=1000)
train() { "$af" train -c "$cfg" "${sub[@]}" --reduction-factor 16 --lr 1e-3 "$@"; }
start=$(date +%s)
for task in mnli qqp sst2; do
  [ -f "$out/$task-st-a/run.json" ] || train --task "$task" --mode st-a --epochs 2 --out "$out/$task-st-a"
done
for task in rte mrpc; do
  [ -f "$out/$task-st-a/run.json" ] || train --task "$task" --mode st-a --epochs 10 --out "$out/$task-st-a"
  [ -f "$out/$task-head/run.json" ] || train --task "$task" --mode head --epochs 10 --out "$out/$task-head"
done
for task in rte mrpc; do
  [ -f "$out/$task-fusion/run.json" ] || "$af" fuse -c "$cfg" "${sub[@]}" --target "$task" --lr 1e-3 \
    --epochs 6 --out "$out/$task-fusion" \
    $(for s in mnli qqp sst2 rte mrpc; do echo --adapters "$out/$s-st-a/adapter"; done)
done
echo "wall time: $(( $(date +%s) - start )) s"
.venv/bin/python - "$out" <<'PY'
import json, sys
from pathlib import Path
out = Path(sys.argv[1])
print("| task | mode | dev accuracy | dev F1 | best epoch | train s |")
print("|------|------|--------------|--------|------------|---------|")
for name in ["mnli-st-a", "qqp-st-a", "sst2-st-a", "rte-head", "rte-st-a", "rte-fusion",
             "mrpc-head", "mrpc-st-a", "mrpc-fusion"]:
    run = json.loads((out / name / "run.json").read_text())
    m, fit = run["dev_metrics"], run["fit"]
    f1 = f"{m['f1']:.3f}" if "f1" in m else ""
    print(f"| {run['task']} | {run['mode']} | {m['accuracy']:.3f} | {f1} | {fit['best_epoch']} "
          f"| {fit['train_seconds']:.0f} |")
PY
