#!/bin/bash
# run_lr.sh NAME LR [MAX_SAMPLES]: L = 7, five knobs, paper size, from the start, a checkpoint every 150 samples
# to MAX_SAMPLES (default 3,000), each one copied by keep_checkpoints.sh; run from a snapshot of a57d798 in /tmp/s20/src
source /work/main/.venv/bin/activate
export PYTHONPATH=/tmp/s20/src TLSTM_BENCH_GIT_COMMIT=a57d798
K=3d-cn:cell_kernel=shift,input_init=normal,input_std=3,bias_init=torch7,recurrent_scale=2
cd /tmp/s20
bash keep_checkpoints.sh $1 & kp=$!
python -m tlstm_bench train $K --preset paper-memorization -L 7 --threads 1 --lr $2 \
   --max-samples ${3:-3000} --checkpoint-every 150 --checkpoint-dir $1/C --results-dir $1/R > $1.log 2>&1
sleep 3; kill $kp
