#!/bin/sh
# The ladder as run on the device machine (16 CPU cores + one H100), about 8 minutes:
#   sh results/evidence/cpu/memorization_ladder/device_run.sh    (with $OUT set; all of it in $OUT/ladder.tar.gz)
# Every process trains with one thread. CPU cores: every rung but 3d-cn at L = 10, with the
# paper's settings and then with the input_init=normal knob; the GPU: 3d-cn at L = 10 (M = 32)
# both ways, and the paper's size (M = 100, 20 symbols) with the knob; two probes at L = 4.
export PYTHONPATH=. OMP_NUM_THREADS=1
O=${OUT:-/tmp/ladder-out}/work
R=$O/ladder
mkdir -p "$R"
L="python3 benchmarks/memorization_ladder.py --out $R --time-limit 300 --deadline 450"
NORMAL='{"input_init": "normal"}'
(nvidia-smi -L; nproc; python3 -c 'import torch; print(torch.__version__)') > "$O/machine.txt" 2>&1
$L --configs slstm,2d,3d-cn,torch-lstm --symbols 3,5,10,20 --depths 1,4,10 --skip 3d-cn:10 --jobs 5 \
    > "$O/cpu_default.log" 2>&1 &
$L --configs slstm,2d,3d-cn --symbols 3,5,10,20 --depths 1,4,10 --skip 3d-cn:10 --jobs 4 \
    --knobs "$NORMAL" --variant normal > "$O/cpu_normal.log" 2>&1 &
# probes at the first rung that fails: gradient clipping, and a second seed of the knob
$L --configs 3d-cn --symbols 5 --depths 4 --clip 1 --variant clip1 > "$O/cpu_clip.log" 2>&1 &
$L --configs 3d-cn --symbols 20 --depths 4 --seed 1 --knobs "$NORMAL" --variant normal > "$O/cpu_seed1.log" 2>&1 &
$L --configs 3d-cn --symbols 3,5,10,20 --depths 10 --device cuda --jobs 2 > "$O/gpu_default.log" 2>&1 &
$L --configs 3d-cn --symbols 3,5,10,20 --depths 10 --device cuda --jobs 2 --knobs "$NORMAL" --variant normal \
    > "$O/gpu_normal.log" 2>&1 &
$L --configs 3d-cn --symbols 20 --depths 10 --channels 100 --max-samples 300000 --device cuda \
    --knobs "$NORMAL" --variant paper-M100-normal > "$O/gpu_paper.log" 2>&1 &
wait
tar czf "$O/../ladder.tar.gz" -C "$O" . && rm -rf "$O"
