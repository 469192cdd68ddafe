#!/bin/bash
# run_l10_on.sh [TIME_LIMIT [LOG]]: L = 10, five knobs, lr 1e-4, on from c10lr4's checkpoint toward 81,000, every
# checkpoint kept: from 6,000 to 8,445 with --time-limit 6000 (twelfth session, stopped without a record), from 7,500 to
# 20,880 with 6900 (fourteenth, 2026-11-29, log c10lr4-on2.log), from 20,880 to 33,945 with 7000 and on with 1800
# (fifteenth, 2026-11-29/30, logs c10lr4-on3.log and -on4.log); run from a snapshot of 3db1d50 in /tmp/s20/src2
source /work/main/.venv/bin/activate
export PYTHONPATH=/tmp/s20/src2 TLSTM_BENCH_GIT_COMMIT=3db1d50
K=3d-cn:cell_kernel=shift,input_init=normal,input_std=3,bias_init=torch7,recurrent_scale=2
cd /tmp/s20
python -m tlstm_bench train $K --preset paper-memorization -L 10 --threads 1 --lr 1e-4 \
   --max-samples 81000 --checkpoint-every 3000 --keep-checkpoints --time-limit ${1:-6900} \
   --checkpoint-dir c10lr4/C --results-dir c10lr4/R2 > c10lr4-on${2:-2}.log 2>&1
