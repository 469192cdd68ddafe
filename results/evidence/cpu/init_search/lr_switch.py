"""lr_switch.py SOURCE_CHECKPOINT DEST_DIR LR: a copy of a kept checkpoint whose run key and Adam
param groups say LR instead of the rate it was trained at, so that `train --lr LR --checkpoint-dir
DEST_DIR` resumes it at the new rate (Adam's moments kept). A probe, not a feature: the record the
resumed run writes says LR for the whole run, so it is not put where `claims` reads."""
import sys
from pathlib import Path

from tlstm_bench.training.checkpoint import checkpoint_path, load_checkpoint, save_checkpoint

src, dest, lr = Path(sys.argv[1]), Path(sys.argv[2]), float(sys.argv[3])
saved = load_checkpoint(src)  # checked as train checks it; written back atomically, as train writes it
was = saved["key"]["lr"]
saved["key"]["lr"] = lr
for group in saved["optimizer"]["param_groups"]:
    group["lr"] = lr
out = checkpoint_path(dest)
out.parent.mkdir(parents=True, exist_ok=True)
save_checkpoint(out, saved)
print(f"{src.name}: sample {saved['counters']['samples']}, lr {was} -> {lr}, into {out}")
