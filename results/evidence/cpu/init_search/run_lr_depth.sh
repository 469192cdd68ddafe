#!/bin/bash
# run_lr_depth.sh NAME L LR MAX_SAMPLES: five knobs, paper size, depth L, from the start, every checkpoint
# kept (a checkpoint every 150 samples, and at each evaluation); run from a snapshot of 3db1d50 in /tmp/s20/src2
source /work/main/.venv/bin/activate
export PYTHONPATH=/tmp/s20/src2 TLSTM_BENCH_GIT_COMMIT=3db1d50
K=3d-cn:cell_kernel=shift,input_init=normal,input_std=3,bias_init=torch7,recurrent_scale=2
cd /tmp/s20
python -m tlstm_bench train $K --preset paper-memorization -L $2 --threads 1 --lr $3 \
   --max-samples $4 --checkpoint-every 150 --keep-checkpoints --checkpoint-dir $1/C --results-dir $1/R > $1.log 2>&1
