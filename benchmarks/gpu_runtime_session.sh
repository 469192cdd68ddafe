#!/usr/bin/env bash
# One device call that measures the GPU runtime figure with the tool's own commands (issue 27):
#   0. the triton cells' kernels compiled ahead, in parallel (benchmarks/triton_precompile.py);
#   1. the headline at M = 100: `tlstm-bench sweep runtime` filtered to each configuration's
#      fastest implementations (triton, cuda-graph; cudnn for slstm and lstm), Triton compiles
#      included;
#   2. the cuDNN anchors: benchmarks/anchor_check.py (lstm against a plain nn.LSTM, <= 1.05x; the
#      cost of copying the weights at every call; the tied sLSTM's copy);
#   3. the headline at 10M parameters: 2d, 3d-cn, slstm and lstm;
#   4. the rest of the sweep (triton-graph, fast, the sLSTM's fused, the other tLSTMs at 10M) with
#      what is left.
# Each stage runs under its own limit, cut by the time left (a cut sweep keeps every finished
# cell: it is resumable), and the store is packed after each stage into ONE archive,
# $OUT/gpu-runtime.tgz (store/, session.log, plan.txt, nvidia-smi.txt, commit.txt): the device returns
# only a few files, and a sweep writes one per cell.
#
#   bash benchmarks/gpu_runtime_session.sh SHA [SECONDS]   # SECONDS: the whole call (default 570)
#
# Then, on this machine (docs/gpu-evidence.md):
#   run=results/evidence/gpu/<date>-<card>; mkdir -p $run && tar xzf <files_at>/gpu-runtime.tgz -C $run
#   tlstm-bench results runtime --results-dir $run --by-depth
#   tlstm-bench plot runtime anchors --results-dir $run --out $run/figures
#
# GPU_SESSION_DEVICE=cpu and GPU_SESSION_SPEC=FILE run the same stages on the CPU with a small spec
# (tests/test_device_scripts.py); nothing else differs.
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=. COLUMNS=100
sha=${1:?usage: gpu_runtime_session.sh COMMIT [SECONDS]}
total=${2:-570}
out=${OUT:?OUT is the folder that comes back}
device=${GPU_SESSION_DEVICE:-cuda}
spec=${GPU_SESSION_SPEC:-runtime}
results=${GPU_SESSION_RESULTS:-/tmp/gpu-runtime-session}
export TLSTM_BENCH_GIT_COMMIT=$sha   # the copy's .git, if any, may be stale
reserve=20                           # packing and exiting after the last stage
fastest=implementation=triton,cuda-graph,cudnn
mkdir -p "$results/store" "$out"
log=$results/session.log
name=$(basename "$spec" .toml)

say() { echo "[$(printf '%4d' "$SECONDS") s] $*" | tee -a "$log"; }

pack() {  # the store and the logs, into one archive, replaced whole
    tar czf "$out/.gpu-runtime.tgz.tmp" -C "$results" --exclude=.locks --exclude=.checkpoints --exclude=.timed \
        store session.log nvidia-smi.txt commit.txt plan.txt 2>/dev/null
    mv -f "$out/.gpu-runtime.tgz.tmp" "$out/gpu-runtime.tgz"
}

# stage LABEL CAP MINIMUM COMMAND...: run COMMAND for at most CAP seconds, fewer if less is left;
# not at all if less than MINIMUM is left. SIGINT first (a sweep stops its cells and keeps its
# records), SIGKILL 15 s later.
stage() {
    local label=$1 cap=$2 minimum=$3 left
    shift 3
    left=$(( total - reserve - SECONDS ))
    (( left < cap )) && cap=$left
    if (( cap < minimum )); then
        say "$label: not run, ${left} s left (needs ${minimum} s)"
        return
    fi
    say "$label: start, at most ${cap} s: $*"
    timeout -s INT -k 15 "$cap" "$@" 2>&1 | tee -a "$log"
    say "$label: exit ${PIPESTATUS[0]}"
    pack
}

echo "$sha" >"$results/commit.txt"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw,memory.used \
    --format=csv >"$results/nvidia-smi.txt" 2>&1
say "device $device, spec $spec, commit $sha, ${total} s in all"
pack

sweep=(python3 -m tlstm_bench sweep "$spec" --results-dir "$results" --device "$device")
# The triton cells' kernels compiled first, 8 at once, into Triton's cache (the sweep then loads
# them instead of compiling each in turn): benchmarks/triton_precompile.py. Skipped on the CPU.
[[ $device == cuda ]] && stage "precompile" 100 40 python3 benchmarks/triton_precompile.py --sweep "$spec" \
    --jobs 8 --timeout-s 90
stage "headline M=100" 300 60 "${sweep[@]}" --only channels=100 --only "$fastest"
anchors=(python3 benchmarks/anchor_check.py --results-dir "$results" --device "$device" --budget-s 50)
[[ $device == cpu ]] && anchors+=(--tiny)
stage "anchors" 90 45 "${anchors[@]}"
stage "headline 10M" 200 45 "${sweep[@]}" --only budget=10M --only config=2d,3d-cn,slstm,lstm --only "$fastest"
stage "the rest" 600 30 "${sweep[@]}"
"${sweep[@]}" --dry-run >"$results/plan.txt" 2>&1   # what is done now, and what is left
head -n 3 "$results/plan.txt" | tee -a "$log"
pack
say "done: $out/gpu-runtime.tgz ($name)"
