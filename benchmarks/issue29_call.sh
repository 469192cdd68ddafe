#!/usr/bin/env bash
# Issue 29's device call: the memorization-lr sweep (its four cells at once) and, beside it when
# a carried checkpoint is here, the CPU's L = 7 run at lr 1e-4 resumed on the GPU toward 1.5x the
# paper's 115K. Each is a benchmarks/device_run.sh of its own, with its own archive under $OUT:
# memorization-lr.tar.gz and l7-lr1e-4-on.tar.gz.
#
#   bash benchmarks/issue29_call.sh SECONDS SHA        # device tool: timeout_s SECONDS + 30,
#                                                      # carry ["results/carry"]
#
#   SECONDS  the hard stop of both (what the session has left less 40, at most 560)
#   SHA      the commit of the clean checkout (`git rev-parse HEAD` here)
#
# Environment (the defaults are the device call's):
#   ISSUE29_CARRY   the run to resume: a --checkpoint-dir holding checkpoint.pt (default
#                   results/carry/l7-lr1e-4, git-ignored, so the call must carry it; a session
#                   that does not have it runs the sweep alone, and says so)
#   ISSUE29_DEVICE  cuda, or cpu for the rehearsal (benchmarks/rehearse_device_stack.sh)
#   ISSUE29_JOBS    the sweep's --jobs (4)
# The resumed run goes on in that folder (on the device, the carried copy). Its key (config,
# task, depth, M, batch, seed, lr) must be the checkpoint's, or train refuses it in one line.
# Exit status: the sweep's, or the resumed run's where the sweep's is 0.
set -u
secs=${1:?usage: issue29_call.sh SECONDS SHA}
sha=${2:?usage: issue29_call.sh SECONDS SHA}
cd "$(dirname "$0")/.."
carry=${ISSUE29_CARRY:-results/carry/l7-lr1e-4}
device=${ISSUE29_DEVICE:-cuda}
K5=3d-cn:cell_kernel=shift,input_init=normal,input_std=3,bias_init=torch7,recurrent_scale=2

bash benchmarks/device_run.sh memorization-lr "$secs" "$sha" -- sweep memorization-lr \
    --device "$device" --jobs "${ISSUE29_JOBS:-4}" &
sweep=$!
resumed=0
if [[ -f $carry/checkpoint.pt ]]; then
    bash benchmarks/device_run.sh l7-lr1e-4-on "$secs" "$sha" -- train "$K5" --preset paper-memorization \
        -L 7 --lr 1e-4 --device "$device" --max-samples 172500 --time-limit 450 --checkpoint-dir "$carry" &
    wait $!
    resumed=$?
else
    echo "no checkpoint at $carry/checkpoint.pt: the L = 7 run at lr 1e-4 is not resumed (the sweep runs alone)"
fi
wait "$sweep"
status=$?
(( status == 0 )) && status=$resumed
exit "$status"
