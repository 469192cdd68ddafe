#!/usr/bin/env bash
# Issue 29's device call, six or seven processes at once, each a benchmarks/device_run.sh of its
# own with its own archive under $OUT:
#   memorization-lr.tar.gz       the memorization-lr sweep's L = 10 cells (lr 1e-3, the one claims
#                                counts, and 1e-4); its L = 7 cells are left out: one call takes
#                                L = 7 to 70-100K, short of the 115K a verdict needs, and the CPU
#                                has run L = 7 at 1e-3 (chance through 121K) and at 1e-4 (150K)
#   memorization-warmup.tar.gz   the memorization-warmup sweep: L = 10 at lr 1e-3 after a linear
#                                warm-up over 30K and 50K samples (two cells)
#   memorization-clip.tar.gz     the memorization-clip sweep: L = 10 at lr 1e-3 after a step at 20K or a
#                                linear warm-up over 30K, the gradient's norm clipped to 1 (two cells)
#   lD-lrR-on.tar.gz             when a checkpoint of a CPU run is here: that run (the five knobs at
#                                depth D, lr R, the sweep's caps) resumed toward 172,500 samples,
#                                its checkpoint where it stopped inside (carry/lD-lrR/checkpoint.pt)
#
#   bash benchmarks/issue29_call.sh SECONDS SHA        # device tool: timeout_s SECONDS + 30
#
#   SECONDS  the hard stop of each (what the session has left less 40, at most 560)
#   SHA      the commit of the clean checkout (`git rev-parse HEAD` here)
#
# Environment (the defaults are the device call's):
#   ISSUE29_CARRY   the run to resume: a --checkpoint-dir named lD-lrR holding checkpoint.pt
#                   (default: the first of results/carry/l10-lr1e-4 and results/carry/l7-lr1e-4
#                   that holds one; a committed checkpoint travels with the checkout, a git-ignored
#                   one needs the device tool's carry ["results/carry"]; without one the sweeps
#                   run alone, and it says so)
#   ISSUE29_DEVICE  cuda, or cpu for the rehearsal (benchmarks/rehearse_device_stack.sh)
#   ISSUE29_DEPTHS  the memorization-lr depths to run (default 10; 7,10 for all four cells)
#   ISSUE29_JOBS    the memorization-lr sweep's --jobs (2)
#   ISSUE29_WARMUP  0 leaves the memorization-warmup sweep out (default 1)
#   ISSUE29_CLIP    0 leaves the memorization-clip sweep out (default 1)
# The resumed run goes on in that folder (on the device, the copy of the checkout). Its key
# (config, task, depth, M, batch, seed, lr) must be the checkpoint's, or train refuses it in one line.
# Exit status: memorization-lr's, else memorization-warmup's, else memorization-clip's, else the resumed
# run's (the first not 0).
set -u
secs=${1:?usage: issue29_call.sh SECONDS SHA}
sha=${2:?usage: issue29_call.sh SECONDS SHA}
cd "$(dirname "$0")/.."
carry=${ISSUE29_CARRY:-}
if [[ -z $carry ]]; then
    for run in results/carry/l10-lr1e-4 results/carry/l7-lr1e-4; do
        [[ -f $run/checkpoint.pt ]] && { carry=$run; break; }
    done
fi
device=${ISSUE29_DEVICE:-cuda}
K5=3d-cn:cell_kernel=shift,input_init=normal,input_std=3,bias_init=torch7,recurrent_scale=2

bash benchmarks/device_run.sh memorization-lr "$secs" "$sha" -- sweep memorization-lr \
    --device "$device" --jobs "${ISSUE29_JOBS:-2}" --only "depth=${ISSUE29_DEPTHS:-10}" &
sweep=$!
warm=
if [[ ${ISSUE29_WARMUP:-1} != 0 ]]; then
    bash benchmarks/device_run.sh memorization-warmup "$secs" "$sha" -- sweep memorization-warmup \
        --device "$device" --jobs 2 &
    warm=$!
fi
clip=
if [[ ${ISSUE29_CLIP:-1} != 0 ]]; then
    bash benchmarks/device_run.sh memorization-clip "$secs" "$sha" -- sweep memorization-clip \
        --device "$device" --jobs 2 &
    clip=$!
fi
resumed=0
name=$(basename "${carry:-none}")
if [[ -f $carry/checkpoint.pt && $name =~ ^l([0-9]+)-lr([0-9.e-]+)$ ]]; then
    DEVICE_RUN_KEEP=$carry bash benchmarks/device_run.sh "$name-on" "$secs" "$sha" -- train "$K5" --preset paper-memorization \
        -L "${BASH_REMATCH[1]}" --lr "${BASH_REMATCH[2]}" --device "$device" \
        --max-samples 172500 --time-limit 450 --checkpoint-dir "$carry" &
    wait $!
    resumed=$?
elif [[ -n $carry ]]; then
    echo "error: no checkpoint.pt in $carry, or its name is not lD-lrR (l10-lr1e-4): nothing resumed" >&2
    resumed=2
else
    echo "no checkpoint under results/carry/ (l10-lr1e-4, l7-lr1e-4): no CPU run is resumed (the sweeps run alone)"
fi
warmed=0 clipped=0
if [[ -n $warm ]]; then
    wait "$warm"
    warmed=$?
fi
if [[ -n $clip ]]; then
    wait "$clip"
    clipped=$?
fi
wait "$sweep"
status=$?
(( status == 0 )) && status=$warmed
(( status == 0 )) && status=$clipped
(( status == 0 )) && status=$resumed
exit "$status"
