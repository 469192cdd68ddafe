# The first device call of the memorization ladder (README.md): device_cell.py, beside this file,
# called by name. As run on 2026-11-26 the command carried that script as a gzip + base64 blob
# (the device's checkout did not have it yet); the blob decoded byte for byte to device_cell.py.
r=results/evidence/cpu/memorization_ladder/device_cell.py;export PYTHONPATH=. DL=$(($(date +%s)+440))
python3 $r G|xargs -P5 -I{} python3 $r {}>$OUT/g.log 2>&1 &
python3 $r C|xargs -P11 -I{} python3 $r {}>$OUT/c.log 2>&1
wait;cd $OUT;tar czf r.tgz r;rm -r r;tail -c300 *.log
