#!/bin/bash
# L = 7, five knobs, lr 1e-4: on from c7lr4's checkpoint at 46,920 toward the paper's 115K (session 22)
source /work/main/.venv/bin/activate
export PYTHONPATH=/tmp/s20/src2 TLSTM_BENCH_GIT_COMMIT=3db1d50
K=3d-cn:cell_kernel=shift,input_init=normal,input_std=3,bias_init=torch7,recurrent_scale=2
cd /tmp/s20
python -m tlstm_bench train $K --preset paper-memorization -L 7 --threads 1 --lr 1e-4 \
   --max-samples 115000 --checkpoint-every 3000 --keep-checkpoints --time-limit 6600 \
   --checkpoint-dir c7lr4/C --results-dir c7lr4/R4 > c7lr4-long4.log 2>&1
