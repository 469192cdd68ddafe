#!/bin/bash
# measure_once.sh RUN: tlstm-bench gradients --json on every kept checkpoint of RUN not yet measured, one line each, then stop
source /work/main/.venv/bin/activate
export PYTHONPATH=/tmp/s20/src2
cd /tmp/s20
touch $1/kept.jsonl $1/kept.done
for f in $1/C/kept/checkpoint-*.pt; do
  grep -q "$(basename $f)" $1/kept.done && continue
  OMP_NUM_THREADS=1 python -m tlstm_bench gradients $f --json 2>/dev/null | python3 -c "import json,sys; [print(json.dumps({'file': '$(basename $f)', **d})) for d in json.load(sys.stdin)]" >> $1/kept.jsonl
  basename $f >> $1/kept.done
done
