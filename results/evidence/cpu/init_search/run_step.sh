#!/bin/bash
# run_step.sh NAME SWITCH CLIP TIME_LIMIT: the five knobs, L = 10, seed 0, the paper's size, lr 1e-4 for
# SWITCH samples then the paper's 1e-3 (--lr-warmup step:SWITCH:1e-4), the gradient norm clipped to CLIP
# (train --clip-grad-norm), one thread, every checkpoint kept. Nineteenth session: from a snapshot of the
# commit that added the clip (/tmp/s19/src, git archive; TLSTM_BENCH_GIT_COMMIT says which).
source /work/main/.venv/bin/activate
export PYTHONPATH=/tmp/s19/src TLSTM_BENCH_GIT_COMMIT=$(cat /tmp/s19/src/SHA)
K=3d-cn:cell_kernel=shift,input_init=normal,input_std=3,bias_init=torch7,recurrent_scale=2
cd /tmp/s19
exec python -m tlstm_bench train $K --preset paper-memorization -L 10 --threads 1 --lr 1e-3 \
   --lr-warmup "step:$2:1e-4" --clip-grad-norm "$3" \
   --max-samples 172500 --checkpoint-every 1500 --keep-checkpoints --time-limit "$4" \
   --checkpoint-dir /tmp/s19/$1/C --results-dir /tmp/s19/$1/R >> "/tmp/s19/$1.log" 2>&1
