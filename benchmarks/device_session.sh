#!/usr/bin/env bash
# One device call that measures what issues 18 and 19 ask of a GPU, inside one time limit:
#   1. benchmarks/gpu_evidence.py (the regress baseline, correctness on the device with
#      cuda-graph and compiled float64 Triton, runtime vs depth, the `time` cross-check);
#      the paper-size training runs are left out (the first H100 run: 147,810 samples of
#      memorization at chance with `fast`; a few minutes cannot show more);
#   2. benchmarks/triton_tune.py with what is left (Triton tile sets, per step and
#      persistent, against `fast` and the cuDNN baselines; the tuning table).
# Everything lands under $OUT in at most 8 files: ev/ (7 files) and side.tgz (the tuner's
# files, stdout of both, nvidia-smi), re-packed after each stage so a cut keeps what ran.
#
#   bash benchmarks/device_session.sh SHA [SECONDS]     # SECONDS: the whole call (default 560)
#
# docs/gpu-evidence.md says how to commit what comes back.
set -u
export PYTHONUNBUFFERED=1 PYTHONPATH=.
sha=${1:?usage: device_session.sh COMMIT [SECONDS]}
total=${2:-560}
out=${OUT:?OUT is the folder that comes back}
side=/tmp/side
mkdir -p "$side/tune" "$out"
pack() { tar czf "$out/side.tgz" -C /tmp side; }

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw,memory.used \
    --format=csv >"$side/nvidia-smi.txt" 2>&1
nvidia-smi >>"$side/nvidia-smi.txt" 2>&1
pack

# the evidence script keeps to its budget (hard stop at +10%); 380 s lets d, a, b1 and e fit
ev_budget=$(( total * 68 / 100 ))
skip=c:memorization-3d-cn,c:addition-3d-cn,c:memorization-slstm,c:addition-slstm
python3 benchmarks/gpu_evidence.py --out "$out/ev" --budget-s "$ev_budget" --commit "$sha" --skip "$skip" \
    2>&1 | tee "$side/evidence_stdout.txt"
echo "evidence: exit ${PIPESTATUS[0]} at ${SECONDS} s" | tee -a "$side/evidence_stdout.txt"
pack

left=$(( total - SECONDS - 15 ))
if (( left >= 60 )); then
    tune_budget=$(( left - 30 ))
    timeout -k 5 "$(( left - 5 ))" python3 benchmarks/triton_tune.py --out "$side/tune" --budget-s "$tune_budget" \
        2>&1 | tee "$side/tune/stdout.txt"
    echo "tune: exit ${PIPESTATUS[0]} at ${SECONDS} s (budget ${tune_budget} s)" | tee -a "$side/tune/stdout.txt"
else
    echo "tune: not run, ${left} s left" | tee "$side/tune/stdout.txt"
fi
pack
echo "device_session: done at ${SECONDS} s"
