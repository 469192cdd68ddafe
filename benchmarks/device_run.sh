#!/usr/bin/env bash
# One tlstm-bench command on the device machine, stopped before the call's time limit, its
# results folder packed into ONE archive under $OUT (the device returns only a few files,
# and a sweep writes one per cell).
#
#   bash benchmarks/device_run.sh NAME SECONDS SHA -- ARGS...
#
#   NAME     the archive's name: $OUT/NAME.tar.gz
#   SECONDS  the command's hard stop (give the call's timeout_s about 30 s more: packing)
#   SHA      the commit the working tree is (`git rev-parse HEAD` here, from a clean tree);
#            the device copy has no .git, so records get it through $TLSTM_BENCH_GIT_COMMIT
#   ARGS     tlstm-bench's arguments; `--results-dir` is added (a fresh folder)
#
# For example (docs/fidelity.md, "The initialisation search"):
#   bash benchmarks/device_run.sh memorization-lr S SHA -- sweep memorization-lr --jobs 4
#       # S about 400: after issue 28's call; benchmarks/issue29_call.sh runs it (docs/gpu-evidence.md)
#   bash benchmarks/device_run.sh memorization-init 560 SHA -- sweep memorization-init --jobs 8
#   bash benchmarks/device_run.sh memorization-init S SHA -- sweep memorization-init --jobs 2 \
#       --only depth=7,10 --only config=3d-cn:cell_kernel=shift,input_init=normal,input_std=3,bias_init=torch7,recurrent_scale=2
#   bash benchmarks/device_run.sh addition-L7 560 SHA -- train 3d-cn --preset paper-addition -L 7 \
#       --device cuda --time-limit 500
# It also sets TLSTM_BENCH_DEADLINE to MARGIN seconds before the hard stop (MARGIN: $DEADLINE_MARGIN_S,
# default 30: the final evaluation, the record, the packing). Every training run stops there as at
# its time limit and keeps its record (stop_reason "deadline"), and a sweep starts no cell after
# it, so a call given less time than its spec's time_limit_s (what a session has left) still
# brings back a record of every cell it started. A cell or run killed by the hard stop itself
# keeps no record.
#
# The archive is a results folder: store/<collection>/*.json (a sweep's working files too,
# but not its checkpoints), plus NAME.log (the command's output), NAME-meta.txt (command,
# commit, times, exit status) and NAME-nvidia-smi.txt; with DEVICE_RUN_KEEP=FOLDER (a run's
# --checkpoint-dir) also that folder's checkpoint.pt as carry/<its name>/checkpoint.pt, so that a
# later session can go on from where the device stopped (a few MB; one file back is at most 16 MiB).
# Unpack it here as a results folder:
#   mkdir -p results/evidence/gpu/DATE-CARD
#   tar xzf NAME.tar.gz -C results/evidence/gpu/DATE-CARD
#   tlstm-bench results --results-dir results/evidence/gpu/DATE-CARD
set -u
name=${1:?usage: device_run.sh NAME SECONDS SHA -- ARGS...}
secs=${2:?usage: device_run.sh NAME SECONDS SHA -- ARGS...}
sha=${3:?usage: device_run.sh NAME SECONDS SHA -- ARGS...}
shift 3
[[ ${1:-} == "--" ]] && shift
out=${OUT:?OUT is the folder that comes back}
dir=$(mktemp -d "${TMPDIR:-/tmp}/device-run.XXXXXX")
export PYTHONUNBUFFERED=1 PYTHONPATH=${PYTHONPATH:-$PWD} TLSTM_BENCH_GIT_COMMIT=$sha  # cells may run elsewhere
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}  # many cell processes on one machine: not 16 threads each
margin=${DEADLINE_MARGIN_S:-30}
export TLSTM_BENCH_DEADLINE=$(( $(date +%s) + secs - margin ))  # training stops here, with its record
mkdir -p "$out"

{
    echo "command: tlstm-bench $* --results-dir <this folder>"
    echo "commit: $sha"
    echo "started: $(date -u +%FT%TZ), hard stop after ${secs} s, TLSTM_BENCH_DEADLINE=$TLSTM_BENCH_DEADLINE" \
        "(${margin} s before it), OMP_NUM_THREADS=$OMP_NUM_THREADS"
} >"$dir/$name-meta.txt"
nvidia-smi >"$dir/$name-nvidia-smi.txt" 2>&1 || echo "no nvidia-smi" >"$dir/$name-nvidia-smi.txt"

timeout -k 10 "$secs" python3 -m tlstm_bench "$@" --results-dir "$dir" >"$dir/$name.log" 2>&1
status=$?
echo "ended: $(date -u +%FT%TZ), exit status $status ($SECONDS s; 124: the hard stop)" >>"$dir/$name-meta.txt"
tail -n 40 "$dir/$name.log"
keep=${DEVICE_RUN_KEEP:-}
if [[ -n $keep && -f $keep/checkpoint.pt ]]; then
    mkdir -p "$dir/carry/$(basename "$keep")" && cp "$keep/checkpoint.pt" "$dir/carry/$(basename "$keep")/"
fi
tar czf "$out/$name.tar.gz" -C "$dir" --exclude='.checkpoints' --exclude='.locks' .
echo "packed: $out/$name.tar.gz ($(du -h "$out/$name.tar.gz" | cut -f1)); exit status $status"
exit "$status"
