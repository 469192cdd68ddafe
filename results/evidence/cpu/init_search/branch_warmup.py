"""branch_warmup.py SOURCE_CHECKPOINT DEST_DIR WARMUP [CLIP]: a copy of a kept checkpoint of a run with a step
warm-up (``step:N:1e-4``) whose key says WARMUP instead, for a run whose warm-up steps at a later or
earlier sample: while both are before either switch the two runs are one (the rate is a function of
the samples seen), so the copy resumed with ``--lr-warmup WARMUP`` is that run from there. With CLIP
the key also says ``clip_grad_norm`` CLIP: the run from there is clipped at CLIP (before, at the source's)."""
import sys
from pathlib import Path

from tlstm_bench.training.checkpoint import checkpoint_path, load_checkpoint, save_checkpoint
from tlstm_bench.warmup import canonical_warmup, parse_warmup

src, dest, warmup = Path(sys.argv[1]), Path(sys.argv[2]), canonical_warmup(sys.argv[3])
saved = load_checkpoint(src)
samples, was = saved["counters"]["samples"], saved["key"]["lr_warmup"]
old, new = parse_warmup(was), parse_warmup(warmup)
lr = saved["key"]["lr"]
assert all(old.rate(lr, s) == new.rate(lr, s) for s in range(samples)), "the warm-ups differ before this checkpoint"
saved["key"]["lr_warmup"] = warmup
if len(sys.argv) > 4:
    saved["key"]["clip_grad_norm"] = float(sys.argv[4])
out = checkpoint_path(dest)
out.parent.mkdir(parents=True, exist_ok=True)
save_checkpoint(out, saved)
print(f"{src.name}: sample {samples}, warm-up {was} -> {warmup}, into {out}")
