#!/bin/bash
# measure_list.sh RUN SAMPLES...: tlstm-bench gradients --json on RUN's kept checkpoints at those samples
# (one line each into RUN/kept.jsonl, as measure_once.sh writes them), skipping those measured before
source /work/main/.venv/bin/activate
export PYTHONPATH=/tmp/s20/src2
cd /tmp/s20
run=$1; shift
touch $run/kept.jsonl $run/kept.done
for n in "$@"; do
  f=$(printf "%s/C/kept/checkpoint-%010d.pt" $run $n)
  [[ -f $f ]] || { echo "no $f"; continue; }
  grep -q "$(basename $f)" $run/kept.done && continue
  OMP_NUM_THREADS=1 python -m tlstm_bench gradients $f --json 2>/dev/null | python3 -c "import json,sys; [print(json.dumps({'file': '$(basename $f)', **d})) for d in json.load(sys.stdin)]" >> $run/kept.jsonl
  basename $f >> $run/kept.done
done
