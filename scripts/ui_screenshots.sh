#!/usr/bin/env bash
# Screenshots of the MLflow UI of a pipeline's store, taken with headless Chromium:
#   runs.png        the experiment's runs table (the sweeps, trials, fusion, baselines)
#   fusion-run.png  the newest fusion run's page (params, metrics, tags)
#   fusion-weights.png  that run's fusion-weight heatmap artifact, when it logged one
#   models.png      the model registry (the registered adapters and fusions)
# It starts `adapterfleet ui` on a free loopback port (for a store that is an `mlflow server`,
# that server's own UI), opens the links it prints (MLflow's machine-learning view) in Chromium
# through scripts/ui_screenshot.py (the DevTools protocol on a pipe: it expands the sweeps to
# show their trials and keeps MLflow's assistant panel shut), and stops the UI again, whatever
# happens.
#
#   scripts/ui_screenshots.sh [-c CONFIG] [-o KEY=VALUE ...] [-d DIR] [-s WIDTH,HEIGHT]
#
#   -c CONFIG   pipeline config whose store is shown (default: configs/demo.yaml, whose store is
#               adapterfleet-runs/)
#   -o K=V      a config override, as for adapterfleet (e.g. -o storage=/tmp/demo/runs); repeatable
#   -d DIR      where the PNG files go (default: ui-screenshots)
#   -s W,H      browser window size (default: 1400,900)
#
# Environment: CHROMIUM (default: chromium or chromium-browser on PATH), ADAPTERFLEET (default:
# adapterfleet on PATH, else .venv/bin/adapterfleet), PYTHON (default: python3; standard library
# only), WAIT_S (seconds a page gets to render before its screenshot, default 8).
# Exit status: 0 done, 2 bad usage, 3 chromium or adapterfleet missing, 4 the UI did not come up
# or shows no experiment, 5 a screenshot failed.
set -uo pipefail

config=configs/demo.yaml
overrides=()
out_dir=ui-screenshots
size=1400,900

usage() { awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "${BASH_SOURCE[0]}"; }

while getopts ":c:o:d:s:h" opt; do
    case $opt in
        c) config=$OPTARG ;;
        o) overrides+=(-o "$OPTARG") ;;
        d) out_dir=$OPTARG ;;
        s) size=$OPTARG ;;
        h) usage; exit 0 ;;
        :) echo "error: -$OPTARG needs a value (see -h)" >&2; exit 2 ;;
        *) echo "error: unknown option -$OPTARG (see -h)" >&2; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
if (($#)); then
    echo "error: unexpected argument '$1' (see -h)" >&2
    exit 2
fi
if [[ ! $size =~ ^[0-9]+,[0-9]+$ ]]; then
    echo "error: -s wants WIDTH,HEIGHT in pixels, e.g. 1400,900; got '$size'" >&2
    exit 2
fi

# Chromium first: without it nothing else is worth starting.
browser=${CHROMIUM:-}
if [[ -z $browser ]]; then
    for candidate in chromium chromium-browser; do
        if command -v "$candidate" >/dev/null 2>&1; then
            browser=$(command -v "$candidate")
            break
        fi
    done
fi
if [[ -z $browser ]] || ! command -v "$browser" >/dev/null 2>&1; then
    echo "error: chromium not found${browser:+ at $browser}; this script needs headless Chromium" \
        "(Debian/Ubuntu: apt-get install -y chromium), or set CHROMIUM=/path/to/chromium" >&2
    exit 3
fi

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
fleet=${ADAPTERFLEET:-}
if [[ -z $fleet ]]; then
    fleet=$(command -v adapterfleet 2>/dev/null || echo "$root/.venv/bin/adapterfleet")
fi
if ! command -v "$fleet" >/dev/null 2>&1; then
    echo "error: adapterfleet not found (tried PATH and $root/.venv/bin); install the project" \
        "(make) or set ADAPTERFLEET=/path/to/adapterfleet" >&2
    exit 3
fi
python=${PYTHON:-python3}
wait_s=${WAIT_S:-8}

work=$(mktemp -d)
ui_pid=
stop_ui() {
    # adapterfleet ui stops its MLflow UI (a process group of its own) on SIGTERM; should it
    # not, that group is killed here too
    if [[ -n $ui_pid ]] && kill -0 "$ui_pid" 2>/dev/null; then
        local groups
        groups=$(cat "/proc/$ui_pid/task/$ui_pid/children" 2>/dev/null)
        kill -TERM "$ui_pid" 2>/dev/null
        for _ in $(seq 1 150); do
            kill -0 "$ui_pid" 2>/dev/null || break
            sleep 0.2
        done
        kill -0 "$ui_pid" 2>/dev/null && kill -KILL "$ui_pid" 2>/dev/null
        wait "$ui_pid" 2>/dev/null
        for group in $groups; do
            kill -0 -- "-$group" 2>/dev/null && kill -KILL -- "-$group" 2>/dev/null
        done
    fi
    ui_pid=
    rm -rf "$work"
}
trap stop_ui EXIT
trap 'exit 130' INT TERM

port=$("$python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
base="http://127.0.0.1:$port"
"$fleet" ui -c "$config" "${overrides[@]}" --port "$port" >"$work/ui.log" 2>&1 &
ui_pid=$!

# Wait (at most 120 s) until the UI answers; the link to the runs is printed before that.
up=0
for _ in $(seq 1 240); do
    if ! kill -0 "$ui_pid" 2>/dev/null; then break; fi
    if "$python" -c "import urllib.request as u; u.urlopen('$base/health', timeout=1)" 2>/dev/null
    then
        up=1
        break
    fi
    sleep 0.5
done
# A store that is an `mlflow server` has its UI there: adapterfleet ui prints its links and ends.
if ((!up)) && grep -q " is a server: its UI is already there" "$work/ui.log"; then
    served=$(sed -n "s/^runs of '.*': \(http[^ ]*\)$/\1/p" "$work/ui.log" | head -n 1)
    base=$(sed 's|^\(https\{0,1\}://[^/#]*\).*|\1|' <<<"$served")
    [[ -n $served ]] && up=1
fi
if ((!up)); then
    echo "error: the MLflow UI did not answer on $base; adapterfleet ui said:" >&2
    cat "$work/ui.log" >&2
    exit 4
fi
runs_link=$(sed -n "s/^runs of '.*': \(http[^ ]*\)$/\1/p" "$work/ui.log" | head -n 1)
models_link=$(sed -n 's/^model registry: \(http[^ ]*\)$/\1/p' "$work/ui.log" | head -n 1)
if [[ -z $runs_link ]]; then
    echo "error: the store has no experiment of this config yet; adapterfleet ui said:" >&2
    cat "$work/ui.log" >&2
    exit 4
fi
experiment_id=$(sed 's|.*/#/experiments/\([^/]*\)/runs.*|\1|' <<<"$runs_link")
view=${runs_link#*\?}

# The newest fusion run of the experiment (the pipeline's, not one `prune` trained) and whether
# it logged its heatmap, over MLflow's REST API: "RUN_ID yes|no", or nothing.
read -r fusion_run heatmap < <("$python" - "$base" "$experiment_id" <<'PY'
import json, sys, urllib.parse, urllib.request
base, experiment_id = sys.argv[1:]
body = {
    "experiment_ids": [experiment_id],
    "filter": "tags.`adapterfleet.kind` = 'fusion'",
    "order_by": ["attributes.start_time DESC"],
    "max_results": 50,
}
request = urllib.request.Request(
    f"{base}/api/2.0/mlflow/runs/search", json.dumps(body).encode(),
    {"Content-Type": "application/json"},
)
with urllib.request.urlopen(request, timeout=30) as response:
    found = json.load(response).get("runs", [])
def pruned(run):
    return any(t["key"] == "adapterfleet.pruned_from" for t in run["data"].get("tags", []))
runs = [run for run in found if not pruned(run)]
if runs:
    run_id = runs[0]["info"]["run_id"]
    query = urllib.parse.urlencode({"run_id": run_id})
    with urllib.request.urlopen(f"{base}/api/2.0/mlflow/artifacts/list?{query}", timeout=30) as r:
        files = {f["path"] for f in json.load(r).get("files", [])}
    print(run_id, "yes" if "fusion_weights.png" in files else "no")
PY
)

mkdir -p "$out_dir"
out_dir=$(cd "$out_dir" && pwd)
shots=("runs.png|$runs_link" "models.png|$models_link")
if [[ -n ${fusion_run:-} ]]; then
    run_page=$base/#/experiments/$experiment_id/runs/$fusion_run
    shots+=("fusion-run.png|$run_page?$view")
    if [[ $heatmap == yes ]]; then
        shots+=("fusion-weights.png|$run_page/artifacts/fusion_weights.png?$view")
    fi
else
    echo "note: no fusion run in experiment $experiment_id; no fusion-run.png" >&2
fi

failed=0
for shot in "${shots[@]}"; do
    file=$out_dir/${shot%%|*}
    url=${shot#*|}
    rm -f "$file"
    click=
    [[ ${shot%%|*} == runs.png ]] && click='button[data-component-id$="runnamecellrenderer.tsx_46"]'
    timeout 180 "$python" "$root/scripts/ui_screenshot.py" "$browser" "$url" "$file" \
        "${size%,*}" "${size#*,}" "$wait_s" "$click" >"$work/chromium.log" 2>&1
    if [[ -s $file ]]; then
        echo "$file  <-  $url"
    else
        echo "error: no screenshot of $url; ui_screenshot.py said:" >&2
        tail -n 20 "$work/chromium.log" >&2
        failed=1
    fi
done
if ((failed)); then
    exit 5
fi
echo "screenshots of $base (experiment $experiment_id) are in $out_dir"
