#!/bin/bash
# run_depth_lr4.sh L TIME_LIMIT [LOG]: the five knobs at depth L, lr 1e-4, the paper's size, seed 0, from
# the start or on from its checkpoint, toward the memorization-lr cell's cap of 172,500 samples, on one
# thread, a checkpoint every 1,500 samples. L = 10 kept its checkpoint in results/carry/l10-lr1e-4/
# (committed for issue 29's device call until the run solved at 150,000, nineteenth; then taken out);
# the others in /tmp/s17/lL/C. Seventeenth session
# (2026-12-07): run from a snapshot of 0fe3db7 in /tmp/s17/src (git archive of that commit).
# A new machine lacks the snapshot: it is made again from the commit (the checkout at /work/main).
[[ -d /tmp/s17/src ]] || { mkdir -p /tmp/s17 && git -C /work/main archive --prefix=src/ 0fe3db7 | tar -x -C /tmp/s17; }
source /work/main/.venv/bin/activate
export PYTHONPATH=/tmp/s17/src TLSTM_BENCH_GIT_COMMIT=0fe3db7
K=3d-cn:cell_kernel=shift,input_init=normal,input_std=3,bias_init=torch7,recurrent_scale=2
L=${1:?usage: run_depth_lr4.sh L TIME_LIMIT [LOG]}
if [[ $L == 10 ]]; then C=/work/main/results/carry/l10-lr1e-4 R=/tmp/s17/R; else C=/tmp/s17/l$L/C R=/tmp/s17/l$L/R; fi
mkdir -p /tmp/s17 && cd /tmp/s17
python -m tlstm_bench train $K --preset paper-memorization -L "$L" --threads 1 --lr 1e-4 \
   --max-samples 172500 --checkpoint-every 1500 --time-limit "${2:?usage: run_depth_lr4.sh L TIME_LIMIT [LOG]}" \
   --checkpoint-dir "$C" --results-dir "$R" > "/tmp/s17/l$L-${3:-1}.log" 2>&1
