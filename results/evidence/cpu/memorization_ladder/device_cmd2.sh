# The second device call of the memorization ladder (README.md): device_cell.py, beside this file,
# called by name. As run on 2026-11-26 the command carried that script as a gzip + base64 blob
# (the device's checkout did not have it yet); the blob decoded byte for byte to device_cell.py.
r=results/evidence/cpu/memorization_ladder/device_cell.py;export PYTHONPATH=. DL=$(($(date +%s)+200));a=/cpu/32/150000;b=$a/d/0
for c in 3d-cn/3/{2,3,4}$b 3d-cn/5/2$b 3d-cn/3/4$a/normal/0 3d-cn/3/4$a/d/1 {torch-lstm,slstm}/3/1$b;do python3 $r $c 2>>$OUT/l & done;wait;cd $OUT;tar czf r2.tgz r
