#!/bin/bash
# run_wu.sh NAME L WARMUP MAX_SAMPLES TIME_LIMIT: five knobs, paper size, depth L, lr 1e-3 after WARMUP,
# from the start, every checkpoint kept (every 150 samples); from a snapshot of 34c17da in /tmp/s25/src
source /work/main/.venv/bin/activate
export PYTHONPATH=/tmp/s25/src TLSTM_BENCH_GIT_COMMIT=34c17da
K=3d-cn:cell_kernel=shift,input_init=normal,input_std=3,bias_init=torch7,recurrent_scale=2
cd /tmp/s25
python -m tlstm_bench train $K --preset paper-memorization -L $2 --threads 1 --lr 1e-3 --lr-warmup $3 \
   --max-samples $4 --checkpoint-every 150 --keep-checkpoints --time-limit $5 --checkpoint-dir $1/C --results-dir $1/R > $1.log 2>&1
