"""The worker: the process that measures, unit after unit, in the plan's priority order."""

from __future__ import annotations

import dataclasses
import functools
import os
import signal
import sys
import time
import traceback
from pathlib import Path

from .common import EXIT_CUDA_BROKEN, EXIT_STOPPED_INT, EXIT_STOPPED_TERM, EXTRA_MODULES, LOG, RECORDS, RESERVED, \
    SAFETY, Log, Records, Stop, _raise_stop, read_records
from .correctness import CorrectnessPart, prepare_process
from .plan import Budget, Cost, State
from .provenance import code_provenance, nvidia_smi, script_args, supervisor_argv
from .settings import make_settings
from .timing import TimingPart
from .training import TrainingPart


class Worker(CorrectnessPart, TimingPart, TrainingPart):
    """One process's run: its settings, what earlier units recorded, the budget; the units."""

    def __init__(self, args):
        import torch

        self.args = args
        self.cfg = make_settings(args.tiny)
        self.out = Path(args.out)
        self.log = Log(self.out / LOG, "worker")
        self.torch = torch
        from tlstm_bench.vocab import torch_device

        self.dev = torch_device(args.device)
        if self.dev.type == "cpu":
            torch.set_num_threads(1)  # the dry run shares a small machine; timing uses 1 thread too
        self.prepare_fn = functools.partial(prepare_process, wrong=args.test_inject_wrong,
                                            failing=args.test_inject_failing, seq_len=self.cfg.seq_len)
        self.prepare_fn()  # this process runs part a and training: the same registries and TF32 flags
        existing = read_records(self.out / RECORDS)
        self.st = State(existing)
        self.prov = self.st.header["provenance"] if self.st.header else self.run_provenance()
        self.records = Records(self.out / RECORDS, self.prov)
        self.cost = Cost(self.dev.type)
        for r in self.st.timings:
            self.cost.learn(r, r["size"])
        self.budget = Budget(args.deadline, self.cfg.summary_reserve_s)
        self.state_file = Path(args.state_file) if args.state_file else None
        # part a's share of the budget counts from part a's start (d runs before it); a restarted
        # worker counts it again from its own start
        self.a_deadline = time.time() + self.cfg.a_share * args.budget_s
        # Registries are per process: a restarted worker needs these again even when the
        # unit that first recorded them is finished.
        self.import_notes = []
        import importlib

        for name in EXTRA_MODULES:
            try:
                importlib.import_module(name)
            except ImportError as exc:
                self.import_notes.append(f"{name} not importable ({exc})")

    def run_provenance(self) -> dict:
        torch = self.torch
        from tlstm_bench.results import provenance

        prov = {**provenance(self.dev), **code_provenance(self.args.commit)}
        prov.update(args=script_args(self.args), argv=supervisor_argv(sys.argv[1:]), cudnn_version=None,
                    driver_version="unknown",
                    gpu_name=None, gpu_capability=None, gpu_memory_gib=None, gpu_multiprocessors=None,
                    triton_version=None, allow_tf32_matmul=torch.backends.cuda.matmul.allow_tf32,
                    allow_tf32_cudnn=torch.backends.cudnn.allow_tf32,
                    float32_matmul_precision=torch.get_float32_matmul_precision(),
                    cuda_version=torch.version.cuda)
        try:
            prov["cudnn_version"] = torch.backends.cudnn.version()
        except Exception:  # noqa: BLE001 - a torch without cuDNN
            pass
        try:
            import triton

            prov["triton_version"] = triton.__version__
        except Exception:  # noqa: BLE001 - triton is optional
            pass
        if self.dev.type == "cuda":
            p = torch.cuda.get_device_properties(self.dev)
            prov.update(gpu_name=p.name, gpu_capability=f"{p.major}.{p.minor}",
                        gpu_memory_gib=round(p.total_memory / 2**30, 1), gpu_multiprocessors=p.multi_processor_count)
        prov["driver_version"] = nvidia_smi("driver_version") or "unknown"
        prov["nvidia_smi"] = nvidia_smi("name,clocks.sm,clocks.max.sm,temperature.gpu,power.draw,power.limit")
        return prov

    def emit(self, kind: str, part: str, **fields) -> dict:
        record = self.records.write(kind, part, **fields)
        self.st.add(record)
        return record

    def cuda_broken(self) -> bool:
        if self.dev.type != "cuda":
            return False
        try:
            self.torch.ones(4, device=self.dev).add_(1).sum().item()
            self.torch.cuda.synchronize(self.dev)
            return False
        except Exception:  # noqa: BLE001 - any failure here means the context is gone
            return True

    def reserve(self, part: str = "") -> float:
        """Seconds kept back for the parts in RESERVED that have not run yet (other than ``part``)."""
        est = {"d": self.regress_estimate, "e": self.time_check_estimate}
        done = {u.split(":")[0] for u in self.st.finished}
        return sum(SAFETY * est[p]() for p in RESERVED
                   if p != part and p not in done and p not in self.args.skip)

    def run(self) -> int:
        if not self.st.header:
            self.emit("header", "-", tiny=self.cfg.tiny, budget_s=self.args.budget_s, device=self.dev.type,
                      settings=dataclasses.asdict(self.cfg))
            self.log(f"device {self.prov.get('gpu_name') or self.prov.get('device_name')}, torch "
                     f"{self.prov['torch_version']}, CUDA {self.prov.get('cuda_version')}, cuDNN "
                     f"{self.prov.get('cudnn_version')}, driver {self.prov.get('driver_version')}, commit "
                     f"{self.prov['git_commit'][:12]} ({self.prov['commit_source']}), code {self.prov['code_hash']}")
        status, ran = "complete", 0
        for unit in self.plan():
            uid, part, estimate, fn = unit
            if uid in self.st.finished:
                continue
            est = estimate()
            reserve = self.reserve(part)
            if not self.budget.fits(est, reserve):
                self.emit("unit", part, unit=uid, status="skipped_budget", est_s=round(est, 2),
                          left_s=round(self.budget.left(), 1), note=f"needs ~{est * SAFETY:.0f} s + {reserve:.0f} s "
                          f"kept for parts {'/'.join(RESERVED)}, {self.budget.left():.0f} s left")
                self.log(f"skip {uid}: estimate {est:.1f} s does not fit ({self.budget.left():.0f} s left)")
                status = "budget"
                continue
            if self.state_file:
                self.state_file.write_text(uid)
            if uid == self.args.test_crash_unit:
                os.kill(os.getpid(), signal.SIGKILL)  # test hook: a worker that dies like a segfault
            self.log(f"start {uid} (estimate {est:.1f} s, {self.budget.left():.0f} s left)")
            t0 = time.time()
            try:
                note = fn()
                self.emit("unit", part, unit=uid, status="done", est_s=round(est, 2),
                          took_s=round(time.time() - t0, 2), note=note)
                if note and "budget" in str(note):
                    status = "budget"
            except Stop:
                self.emit("unit", part, unit=uid, status="interrupted", est_s=round(est, 2),
                          took_s=round(time.time() - t0, 2))
                raise
            except Exception as exc:  # noqa: BLE001 - one broken unit must not lose the rest
                self.emit("unit", part, unit=uid, status="failed", est_s=round(est, 2),
                          took_s=round(time.time() - t0, 2), error=f"{type(exc).__name__}: {exc}",
                          traceback=traceback.format_exc()[-4000:])
                self.log(f"unit {uid} failed: {type(exc).__name__}: {exc}")
                if self.cuda_broken():
                    self.log("the CUDA context is broken: exiting so the supervisor starts a fresh worker")
                    if self.state_file:
                        self.state_file.write_text("")  # recorded above as failed; not a crash to record again
                    return EXIT_CUDA_BROKEN
            self.log(f"end {uid} ({time.time() - t0:.1f} s)")
            ran += 1
            if ran == self.args.test_stop_after_units:
                self.budget.deadline = time.time() + self.budget.tail  # test hook: the budget runs out now
        self.emit("worker_end", "-", status=status)
        return 0

    def plan(self):
        """Units in priority order: (id, part, estimate() -> s, run() -> note). Lazy: later units
        depend on what earlier ones found (which implementations passed)."""
        cfg = self.cfg
        for step in cfg.order:
            if step in self.args.skip:
                continue
            if step == "a":
                yield "a:implementations", "a", lambda: 5.0 if self.dev.type == "cuda" else 1.0, self.unit_discover
                yield "a:graph-step", "a", self.graph_step_estimate, self.unit_graph_step
                yield from self.check_units()
                yield "a:audit", "a", self.audit_estimate, self.unit_audit
            elif step.startswith("b"):
                phase = next(p for p in cfg.phases if p.key == step)
                yield from self.timing_units(phase)
            elif step.startswith("c:"):
                spec = next(s for s in cfg.training if s.key == step[2:])
                yield f"c:{spec.key}", "c", lambda spec=spec: self.train_first_estimate(spec), \
                    lambda spec=spec: self.unit_train(spec)
            elif step == "d":
                yield "d:regress-baseline", "d", self.regress_estimate, self.unit_regress
            elif step == "e":
                yield "e:time-check", "e", self.time_check_estimate, self.unit_time_check


def worker_main(args) -> int:
    signal.signal(signal.SIGTERM, _raise_stop)
    log = Log(Path(args.out) / LOG, "worker")
    from tlstm_bench.errors import UserError
    from tlstm_bench.sweeps.cell import die_with_parent

    # a supervisor killed from outside (a test's timeout, SIGKILL) must not leave its worker
    # measuring on alone: seen, two orphaned dry-run workers still busy 24 minutes later
    die_with_parent(os.getppid())

    try:
        worker = Worker(args)
        return worker.run()
    except UserError as exc:
        log(f"error: {exc}")
        return 2
    except Stop as exc:
        log(f"stopped ({exc}); everything measured so far is in {RECORDS}")
        return EXIT_STOPPED_TERM
    except KeyboardInterrupt:
        log("interrupted; everything measured so far is in the records")
        return EXIT_STOPPED_INT
    except Exception as exc:  # noqa: BLE001 - logged for the supervisor, which decides
        log(f"worker error: {type(exc).__name__}: {exc}\n{traceback.format_exc()}")
        return 1
