#!/usr/bin/env bash
# Issue 29's device call, five processes at once, each a benchmarks/device_run.sh of its own with
# its own archive under $OUT:
#   memorization-lr.tar.gz       the memorization-lr sweep's L = 10 cells (lr 1e-3, the one claims
#                                counts, and 1e-4); its L = 7 cells are left out: one call takes
#                                L = 7 to 70-100K, short of the 115K a verdict needs, and the CPU
#                                has run L = 7 at 1e-3 (chance through 121K) and at 1e-4 (150K)
#   memorization-warmup.tar.gz   the memorization-warmup sweep: L = 10 at lr 1e-3 after a linear
#                                warm-up over 30K and 50K samples (two cells)
#   l7-lr1e-4-on.tar.gz          when a carried checkpoint is here: the CPU's L = 7 run at lr 1e-4
#                                resumed toward 1.5x the paper's 115K
#
#   bash benchmarks/issue29_call.sh SECONDS SHA        # device tool: timeout_s SECONDS + 30,
#                                                      # carry ["results/carry"]
#
#   SECONDS  the hard stop of each (what the session has left less 40, at most 560)
#   SHA      the commit of the clean checkout (`git rev-parse HEAD` here)
#
# Environment (the defaults are the device call's):
#   ISSUE29_CARRY   the run to resume: a --checkpoint-dir holding checkpoint.pt (default
#                   results/carry/l7-lr1e-4, git-ignored, so the call must carry it; a session
#                   that does not have it runs the sweeps alone, and says so)
#   ISSUE29_DEVICE  cuda, or cpu for the rehearsal (benchmarks/rehearse_device_stack.sh)
#   ISSUE29_DEPTHS  the memorization-lr depths to run (default 10; 7,10 for all four cells)
#   ISSUE29_JOBS    the memorization-lr sweep's --jobs (2)
#   ISSUE29_WARMUP  0 leaves the memorization-warmup sweep out (default 1)
# The resumed run goes on in that folder (on the device, the carried copy). Its key (config,
# task, depth, M, batch, seed, lr) must be the checkpoint's, or train refuses it in one line.
# Exit status: memorization-lr's, else memorization-warmup's, else the resumed run's (the first not 0).
set -u
secs=${1:?usage: issue29_call.sh SECONDS SHA}
sha=${2:?usage: issue29_call.sh SECONDS SHA}
cd "$(dirname "$0")/.."
carry=${ISSUE29_CARRY:-results/carry/l7-lr1e-4}
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
resumed=0
if [[ -f $carry/checkpoint.pt ]]; then
    bash benchmarks/device_run.sh l7-lr1e-4-on "$secs" "$sha" -- train "$K5" --preset paper-memorization \
        -L 7 --lr 1e-4 --device "$device" --max-samples 172500 --time-limit 450 --checkpoint-dir "$carry" &
    wait $!
    resumed=$?
else
    echo "no checkpoint at $carry/checkpoint.pt: the L = 7 run at lr 1e-4 is not resumed (the sweeps run alone)"
fi
warmed=0
if [[ -n $warm ]]; then
    wait "$warm"
    warmed=$?
fi
wait "$sweep"
status=$?
(( status == 0 )) && status=$warmed
(( status == 0 )) && status=$resumed
exit "$status"
