#!/bin/bash
# measure_rev.sh RUN: as measure_once.sh, newest kept checkpoint first (a second process beside it)
source /work/main/.venv/bin/activate
export PYTHONPATH=/tmp/s20/src2
cd /tmp/s20
for f in $(ls -r $1/C/kept/checkpoint-*.pt); do
  grep -q "$(basename $f)" $1/kept.done $1/kept.rev 2>/dev/null && continue
  pgrep -f "gradients $f" >/dev/null && break
  OMP_NUM_THREADS=1 python -m tlstm_bench gradients $f --json 2>/dev/null | python3 -c "import json,sys; [print(json.dumps({'file': '$(basename $f)', **d})) for d in json.load(sys.stdin)]" >> $1/kept.rev.jsonl
  basename $f >> $1/kept.rev
done
