#!/usr/bin/env bash
# The prepared device calls, rehearsed on this CPU with the device's own software: Python 3.12,
# torch 2.11 (its CUDA wheel, run on the CPU) and Triton 3.6, from a bare checkout
# (PYTHONPATH=., nothing installed), as the GPU machine runs them. A call that fails there on a
# version difference costs a whole lent session; this found two such faults
# (results/evidence/cpu/device_stack/README.md).
#
#   bash benchmarks/rehearse_device_stack.sh [VENV] [--compile]
#
#   VENV       where the device's software is installed (default /tmp/device-stack; made the
#              first time: about a minute and 4.9 GB from the package registry)
#   --compile  also compile for sm_90 with it every kernel of issue 27's runtime sweep and of
#              issue 28's session plan (about 2.5 minutes on 2 cores)
#
# Steps, each "ok" or "FAILED" with its log under $LOGS (default a fresh temporary folder):
#   interpreter  Triton's interpreter runs the kernels (tests/test_triton.py, 2d and 3d-cn, float64)
#   issue-27     gpu_runtime_session.sh on the CPU (GPU_SESSION_DEVICE=cpu) with a toy spec, one archive
#   issue-28     triton_session.py's dry run (--device cpu, the interpreter), its float64 verdict MET
#   issue-29     issue29_call.sh on the CPU, a 150 s hard stop: device_run.sh packs each cut sweep into one
#                archive (the cells it started stopped at its deadline and kept their records, none failed)
#   issue-29-warmup  the memorization-warmup archive holds a record of a warm-up cell (lr_warmup linear:...)
#   issue-29-clip    the memorization-clip archive holds a record of a clipped cell (clip_grad_norm 1.0)
#   issue-29-on  (when results/carry/l10-lr1e-4/ or l7-lr1e-4/ holds a checkpoint.pt) the same call
#                resumed a copy of it beside the sweep, stopped at the deadline with its record, in an
#                archive of its own
#   compile-27   (--compile) triton_precompile.py --sweep runtime --fake-target 90, none failed
#   compile-28   (--compile) results/evidence/cpu/precompile_rehearsal/rehearse.py, none failed
# Exit status: the number of steps that failed.
set -u
venv=/tmp/device-stack compile=0
for arg in "$@"; do
    case $arg in
        --compile) compile=1 ;;
        -*) echo "error: unknown option $arg; use [VENV] [--compile]" >&2; exit 2 ;;
        *) venv=$arg ;;
    esac
done
cd "$(dirname "$0")/.."
logs=${LOGS:-$(mktemp -d "${TMPDIR:-/tmp}/rehearse.XXXXXX")}
mkdir -p "$logs" || { echo "error: cannot make the log folder $logs; set LOGS to a writable one" >&2; exit 2; }

if [[ ! -x $venv/bin/python3 ]]; then
    py=
    for candidate in ~/.pyenv/versions/3.12*/bin/python3.12 "$(command -v python3.12)"; do
        [[ -x $candidate ]] && "$candidate" --version >/dev/null 2>&1 && { py=$candidate; break; }
    done
    [[ -n $py ]] || { echo "error: no python3.12 here; install one (pyenv install 3.12)" >&2; exit 2; }
    "$py" -m venv "$venv" && "$venv/bin/pip" install -q torch==2.11.0 triton==3.6.0 typer rich pandas \
        matplotlib pytest >"$logs/install.log" 2>&1 || { echo "error: install failed: $logs/install.log" >&2; exit 2; }
fi
export PATH=$venv/bin:$PATH PYTHONPATH=$PWD PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1
python3 -c "import sys, torch, triton, numpy; print('Python', sys.version.split()[0], 'torch', torch.__version__,
      'triton', triton.__version__, 'numpy', numpy.__version__)"
echo "logs: $logs"
failed=0

step() {  # step NAME CHECK-PATTERN COMMAND...: ok when the command exits 0 and its log holds the pattern
    local name=$1 pattern=$2 start=$SECONDS
    shift 2
    if "$@" >"$logs/$name.log" 2>&1 && grep -q -- "$pattern" "$logs/$name.log"; then
        echo "ok      $name ($((SECONDS - start)) s)"
    else
        echo "FAILED  $name ($((SECONDS - start)) s): $logs/$name.log"
        failed=$((failed + 1))
    fi
}

step interpreter " passed" env TRITON_INTERPRET=1 python3 -m pytest -q -p no:cacheprovider tests/test_triton.py \
    -k "test_triton_equals_eager_across_tiles_float64 and (2d or 3d-cn)"
step issue-27 "done: " env OUT="$logs/out27" GPU_SESSION_DEVICE=cpu GPU_SESSION_SPEC=benchmarks/gpu-runtime-tiny.toml \
    GPU_SESSION_RESULTS="$logs/results27" bash benchmarks/gpu_runtime_session.sh rehearsal 300
step issue-28 "^MET: every timed triton variant right against float64 eager: [1-9]" env TRITON_INTERPRET=1 \
    python3 benchmarks/triton_session.py --out "$logs/session28" --device cpu --groups train,m100,floor --rounds 3 \
    --archive "$logs/out28/triton-session.tar.gz"
# a 150 s hard stop on purpose: the cells it starts stop at TLSTM_BENCH_DEADLINE with their
# records, the rest are not started (exit 1), and the archives are packed. The deadline is 60 s
# before the stop (the device's 30 s is too little on a loaded CPU for the resumed L = 7 model's
# last evaluation). The resumed run works on a copy of the carried checkpoint (resuming moves it on),
# the one issue29_call.sh would pick.
carry=
for run in results/carry/l10-lr1e-4 results/carry/l7-lr1e-4; do
    [[ -f $run/checkpoint.pt ]] && { carry=$run; break; }
done
copy=
if [[ -n $carry ]]; then
    mkdir -p "$logs/carry" && cp -r "$carry" "$logs/carry/" && copy=$logs/carry/$(basename "$carry")
fi
step issue-29 "([1-9][0-9]* ok, 0 failed); wall time" bash -c "OUT='$logs/out29' ISSUE29_DEVICE=cpu ISSUE29_JOBS=2 DEADLINE_MARGIN_S=60 \
    ISSUE29_CARRY='$copy' bash benchmarks/issue29_call.sh 150 rehearsal; true"
step issue-29-warmup '"lr_warmup": "linear:' tar xzf "$logs/out29/memorization-warmup.tar.gz" -O --wildcards \
    './store/memorization-warmup/*.json'
step issue-29-clip '"clip_grad_norm": 1.0' tar xzf "$logs/out29/memorization-clip.tar.gz" -O --wildcards \
    './store/memorization-clip/*.json'
if [[ -n $carry ]]; then
    name=$(basename "$carry")
    step issue-29-on "^record saved to " tar xzf "$logs/out29/$name-on.tar.gz" -O "./$name-on.log"
fi
if [[ $compile == 1 ]]; then
    step compile-27 "^precompiled [1-9][0-9]* variant(s) in [0-9.]* s ([0-9]* processes)$" \
        env TRITON_CACHE_DIR="$logs/triton-cache" python3 benchmarks/triton_precompile.py --sweep runtime \
        --fake-target 90 --jobs 2 --timeout-s 600
    step compile-28 "precompiled .* variant(s)" env TRITON_CACHE_DIR="$logs/triton-cache" \
        python3 results/evidence/cpu/precompile_rehearsal/rehearse.py --jobs 2
fi
echo "$failed step(s) failed"
exit "$failed"
