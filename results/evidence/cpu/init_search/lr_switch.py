"""lr_switch.py SOURCE_CHECKPOINT DEST_DIR LR: a copy of a kept checkpoint whose run key and Adam
param groups say LR instead of the rate it was trained at, so that `train --lr LR --checkpoint-dir
DEST_DIR` resumes it at the new rate (Adam's moments kept). A probe, not a feature: the record the
resumed run writes says LR for the whole run, so it is not put where `claims` reads."""
import sys
from pathlib import Path

import torch

src, dest, lr = Path(sys.argv[1]), Path(sys.argv[2]), float(sys.argv[3])
saved = torch.load(src, map_location="cpu", weights_only=True)
was = saved["key"]["lr"]
saved["key"]["lr"] = lr
for group in saved["optimizer"]["param_groups"]:
    group["lr"] = lr
dest.mkdir(parents=True, exist_ok=True)
torch.save(saved, dest / "checkpoint.pt")
print(f"{src.name}: sample {saved['counters']['samples']}, lr {was} -> {lr}, into {dest / 'checkpoint.pt'}")
