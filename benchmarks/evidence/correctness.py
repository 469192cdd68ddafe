"""Part a: every implementation against its oracle on the device, the graphed step in
processes of its own, the separability audit."""

from __future__ import annotations

import math
import os
import signal
import time
import traceback

from .common import FAILING, INJECTED, INTERPRETED_CONFIGS, ORACLE, ORACLE_CHAIN, PRIORITY_CONFIGS, \
    SAFETY, Stop, interpreted
from .plan import Cost, check_cost


class CorrectnessPart:
    """Part a, mixed into the Worker: its units and checks."""

    def unit_discover(self) -> str:
        """Every registered implementation (``implementations_of``: the registries and the graphed
        step), each probed on a tiny model here, except the graphed ones: a capture that fails
        poisons its process, so ``cuda-graph`` and ``triton-graph`` are probed and checked in
        processes of their own (unit a:graph-step)."""
        from tlstm_bench.timing import implementations_of
        from tlstm_bench.vocab import GRAPHED_IMPLEMENTATIONS

        self.a_deadline = time.time() + self.cfg.a_share * self.args.budget_s
        self.emit("implementation", "a", impl="eager", family="tlstm", available=True, role="oracle",
                  reason="the tLSTM oracle of the timed implementations (itself tested against `reference` in CI)")
        for family in ("slstm", "tlstm"):
            for name in implementations_of(family):
                if name in ORACLE_CHAIN or name in GRAPHED_IMPLEMENTATIONS:
                    continue
                available, reason = self.probe(family, name)
                self.emit("implementation", "a", impl=name, family=family, available=available, reason=reason)
                self.log(f"implementation {name} ({family}): "
                         + ("available" if available is True
                            else f"{'BROKEN' if available else 'not available'}: {reason}"))
        return "; ".join(self.import_notes) or None

    def probe(self, family: str, name: str):
        """(True | False | "broken", reason): a forward and backward of a tiny model with ``name``."""
        from tlstm_bench.errors import UserError
        from tlstm_bench.models import build_model

        torch = self.torch
        try:
            torch.manual_seed(0)
            model = build_model("slstm" if family == "slstm" else "2d", 2, vocab=5, channels=4,
                                implementation=name).to(self.dev)
            y, _ = model(torch.randint(0, 5, (1, 4)).to(self.dev))
            y.sum().backward()
            if self.dev.type == "cuda":
                torch.cuda.synchronize(self.dev)
            return True, None
        except UserError as exc:
            return False, str(exc)
        except Exception as exc:  # noqa: BLE001 - recorded; the implementation is not timed
            return "broken", f"{type(exc).__name__}: {exc}"

    def check_units(self):
        cfg = self.cfg
        for impl in self.ordered_check_impls():
            family = self.st.impls[impl]["family"]
            configs = ["slstm"] if family == "slstm" else [c for c in PRIORITY_CONFIGS if c != "slstm"]
            if interpreted(impl):
                configs = list(INTERPRETED_CONFIGS)
            per = check_cost(impl, self.dev.type)
            count = len(configs) * len(cfg.check_depths) * len(cfg.dtypes)
            # estimate: the first check of each configuration (the unit stops itself at part a's share)
            yield (f"a:check:{impl}", "a", lambda per=per, n=len(configs): per * n,
                   lambda impl=impl, configs=configs, per=per, count=count: self.unit_checks(impl, configs, per, count))

    def ordered_check_impls(self, graphed: bool = False) -> list[str]:
        """The available implementations, the known ones first; the graphed step only if asked
        (its checks are unit a:graph-step, not a:check)."""
        usable = [n for n, r in self.st.impls.items() if r["available"] is True and r.get("role") != "oracle"
                  and (graphed or not r.get("graphed"))]
        first = [n for n in ("fused", "cudnn", "wavefront", "fast", "cuda-graph") if n in usable]
        return first + [n for n in usable if n not in first]

    def graph_step_estimate(self) -> float:
        """A process and the checks of each graphed step (``vocab.GRAPHED_IMPLEMENTATIONS``)."""
        from tlstm_bench.vocab import GRAPHED_IMPLEMENTATIONS

        n = len([c for c in PRIORITY_CONFIGS if c != "slstm"]) * len(self.cfg.check_depths)
        one = Cost.SPAWN_S[self.dev.type] + n * (0.8 if self.dev.type == "cuda" else 0.05)
        return len(GRAPHED_IMPLEMENTATIONS) * one

    def unit_graph_step(self) -> str | None:
        """Each graphed step (``cuda-graph``, ``triton-graph``) vs ``eager`` as whole steps
        (StepRun), float64, loss and every parameter gradient, on replay after new data was
        copied into the input buffers; every tLSTM configuration at the check depths. In a
        spawned process: a capture that fails poisons that process's CUDA context, never this
        one; a process that breaks is replaced (twice at most) for the cases it had left."""
        from tlstm_bench.vocab import GRAPHED_IMPLEMENTATIONS

        cfg = self.cfg
        items = [(c, d) for d in cfg.check_depths for c in PRIORITY_CONFIGS if c != "slstm"]
        opts = dict(device=str(self.dev), channels=cfg.check_channels, vocab=cfg.check_vocab,
                    seq_len=cfg.check_seq_len, seed=5, tolerance=cfg.tolerance["float64"])
        for name in GRAPHED_IMPLEMENTATIONS:
            timeout = max(30.0, self.budget.left() - self.reserve("a"))
            results, unavailable = run_graph_checks(name, items, opts, timeout, self.prepare_fn)
            if unavailable:
                self.emit("implementation", "a", impl=name, family="tlstm", available=False, reason=unavailable,
                          graphed=True)
                self.log(f"implementation {name} (tlstm, a whole graphed step): not available: {unavailable}")
                continue
            broken = [r for r in results if r.get("error")]
            available = True if len(broken) < len(results) else "broken"
            self.emit("implementation", "a", impl=name, family="tlstm", graphed=True, available=available,
                      reason=broken[0]["error"].splitlines()[0] if broken else None)
            for r in results:
                self.emit_graph_check(name, r, opts)
            self.log(f"  {name}: {len(results)} step checks against eager (float64), "
                     f"{sum(r.get('passed') is not True for r in results)} failed")
        return None

    def emit_graph_check(self, name: str, r: dict, opts: dict) -> dict:
        errors = r.get("errors") or {}
        worst = max(errors, key=errors.get) if errors else None
        rec = self.emit("check", "a", check="equivalence", how="whole step, on replay", impl=name,
                        reference="eager", config=r["config"], depth=r["depth"], dtype="float64",
                        channels=opts["channels"], batch=1, seq_len=opts["seq_len"], device=self.dev.type,
                        passed=r.get("passed", False), tolerance=opts["tolerance"],
                        max_rel_error=errors.get(worst) if worst else None, worst=worst, errors=errors,
                        error=r.get("error"), affects_timing=True)
        if rec["passed"] is not True:
            what = (r.get("error") or "").splitlines()[0] if r.get("error") else f"{worst} off by {errors[worst]:.3g}"
            self.log(f"  FAILED {name} {r['config']} L={r['depth']} float64 (step): {what}")
        return rec

    def unit_checks(self, impl: str, configs: list[str], per: float, count: int) -> str | None:
        """Equivalence with the oracle (float64 first: the tight one), then gradient accumulation."""
        cfg = self.cfg
        order = [(dtype, depth, config) for dtype in reversed(cfg.dtypes) for depth in reversed(cfg.check_depths)
                 for config in configs]
        if interpreted(impl):
            order = [("float32", max(cfg.check_depths), config) for config in configs]
            count = len(order)
        done, failed, last = 0, 0, per
        for dtype, depth, config in order:
            if time.time() + last * SAFETY > self.a_deadline or not self.budget.fits(last, self.reserve()):
                left = len(order) - done
                self.log(f"  {impl}: {left} check(s) left unchecked (part a's share of the budget is used)")
                return f"{left} of {count} checks not run: part a's share of the budget (budget)"
            t0 = time.time()
            rec = self.guarded_check(self.check_one, impl, config, depth, dtype)
            last = time.time() - t0
            done += 1
            failed += rec["passed"] is False
        family = self.st.impls[impl]["family"]
        if family == "tlstm" and not interpreted(impl):
            for config in ("2d", "3d-cn"):
                if time.time() + last * 2 * SAFETY > self.a_deadline:
                    return "accumulation check not run (budget)"
                self.guarded_check(self.check_accumulate, impl, config)
        self.log(f"  {impl}: {done} equivalence checks, {failed} failed")
        return None

    def guarded_check(self, fn, impl: str, config: str, *rest) -> dict:
        """Run one check; an implementation that refuses a configuration (UserError) is recorded as
        unsupported there (not a failure); any other error is a failed check."""
        from tlstm_bench.errors import UserError

        check = "equivalence" if fn == self.check_one else "accumulate"
        depth, dtype = (rest + (3, "float64"))[:2] if rest else (3, "float64")
        base = dict(check=check, impl=impl, config=config, depth=depth, dtype=dtype, device=self.dev.type,
                    affects_timing=check == "equivalence", max_rel_error=None, worst=None, errors={},
                    tolerance=self.cfg.tolerance[dtype])
        try:
            return fn(impl, config, *rest)
        except Stop:
            raise
        except UserError as exc:
            self.log(f"  {impl} does not support {config} L={depth} {dtype}: {exc}")
            return self.emit("check", "a", **base, passed=None, unsupported=str(exc))
        except Exception as exc:  # noqa: BLE001 - an implementation that raises is wrong here
            self.log(f"  FAILED {impl} {config} L={depth} {dtype}: raised {type(exc).__name__}: {exc}")
            rec = self.emit("check", "a", **base, passed=False, error=f"{type(exc).__name__}: {exc}",
                            traceback=traceback.format_exc()[-3000:])
            if self.cuda_broken():
                raise
            return rec

    def _pair(self, impl: str, config: str, depth: int, dtype):
        """The oracle model and a copy with ``impl``: same (perturbed, non-trivial) parameters."""
        import copy

        torch = self.torch
        from tlstm_bench.models import build_model

        family = "slstm" if config == "slstm" else "tlstm"
        torch.manual_seed(1234 + depth)
        ref = build_model(config, depth, vocab=self.cfg.check_vocab, channels=self.cfg.check_channels,
                          implementation=ORACLE[family])
        with torch.no_grad():
            for p in ref.parameters():  # norm gains 1 / biases 0 would hide a swapped gain and bias
                p.add_(torch.randn_like(p) * 0.1)
        ref.to(device=self.dev, dtype=dtype)
        model = copy.deepcopy(ref)
        model.implementation = impl
        return ref, model

    def _inputs(self, model, seed: int, dtype):
        torch = self.torch
        gen = torch.Generator().manual_seed(seed)
        b, t, v = self.cfg.check_batch, self.cfg.check_seq_len, self.cfg.check_vocab
        x = torch.randint(0, v, (b, t), generator=gen).to(self.dev)
        target = torch.randint(0, v, (b, t), generator=gen).to(self.dev)
        zero = model.zero_state(b, torch.zeros(1, dtype=dtype, device=self.dev))
        state = [torch.randn(z.shape, generator=gen, dtype=torch.float64).to(self.dev, dtype) for z in zero]
        weights = [torch.randn(z.shape, generator=gen, dtype=torch.float64).to(self.dev, dtype) for z in zero]
        return x, target, state, weights

    def _forward_backward(self, model, x, target, state, weights, with_state: bool):
        """Loss over the outputs and the final state; backward. Returns every tensor to compare."""
        torch = self.torch
        from torch.nn import functional as F

        kind = type(model.zero_state(1, torch.zeros(1, device=self.dev)))
        leaves = [s.clone().requires_grad_(True) for s in state] if with_state else None
        y, final = model(x, kind(*leaves) if with_state else None)
        loss = F.cross_entropy(y.reshape(-1, y.shape[-1]), target.reshape(-1))
        loss = loss + sum((f * w).sum() for f, w in zip(final, weights))
        loss.backward()
        got = {"y": y.detach(), "h_T": final[0].detach(), "c_T": final[1].detach()}
        for name, p in model.named_parameters():
            got[f"grad {name}"] = None if p.grad is None else p.grad.detach().clone()
        if with_state:
            got["grad h0"], got["grad c0"] = (t.grad.detach().clone() if t.grad is not None else None for t in leaves)
        return got

    def check_one(self, impl: str, config: str, depth: int, dtype_name: str) -> dict:
        torch = self.torch
        dtype = getattr(torch, dtype_name)
        ref, model = self._pair(impl, config, depth, dtype)
        x, target, state, weights = self._inputs(ref, 7 + depth, dtype)
        x_warm, *_ = self._inputs(ref, 99, dtype)
        errors = {}
        for with_state in (True, False):
            # a first call on other data: a capturing implementation must be right on replay too
            for p in model.parameters():
                p.grad = None
            self._forward_backward(model, x_warm, target, state, weights, with_state)
            for m in (ref, model):
                for p in m.parameters():
                    p.grad = None
            want = self._forward_backward(ref, x, target, state, weights, with_state)
            got = self._forward_backward(model, x, target, state, weights, with_state)
            tag = "given state" if with_state else "zero state"
            errors.update({f"{name} ({tag})": e for name, e in rel_errors(got, want).items()})
        worst = max(errors, key=errors.get)
        tol = self.cfg.tolerance[dtype_name]
        passed = all(e <= tol for e in errors.values())
        rec = self.emit("check", "a", check="equivalence", impl=impl, reference=ref.implementation, config=config,
                        depth=depth, dtype=dtype_name, channels=self.cfg.check_channels, batch=self.cfg.check_batch,
                        seq_len=self.cfg.check_seq_len, device=self.dev.type, passed=passed, tolerance=tol,
                        max_rel_error=errors[worst], worst=worst, errors=errors, affects_timing=True)
        if not passed:
            self.log(f"  FAILED {impl} {config} L={depth} {dtype_name}: {worst} off by {errors[worst]:.3g}")
        return rec

    def check_accumulate(self, impl: str, config: str) -> dict:
        """Two backward passes on different data without zeroing: .grad must be g1 + g2 (pytorch#181723)."""
        torch = self.torch
        dtype = torch.float64
        ref, model = self._pair(impl, config, 3, dtype)
        x1, target, state, weights = self._inputs(ref, 21, dtype)
        x2, *_ = self._inputs(ref, 22, dtype)
        grads = {}
        for tag, m in (("ref", ref), ("impl", model)):
            leaves = [s.clone().requires_grad_(True) for s in state]
            kind = type(m.zero_state(1, torch.zeros(1, device=self.dev)))
            from torch.nn import functional as F

            for x in (x1, x2):
                y, final = m(x, kind(*leaves))
                loss = F.cross_entropy(y.reshape(-1, y.shape[-1]), target.reshape(-1))
                (loss + sum((f * w).sum() for f, w in zip(final, weights))).backward()
            grads[tag] = {f"grad {n}": p.grad.detach().clone() for n, p in m.named_parameters() if p.grad is not None}
            grads[tag].update({"grad h0": leaves[0].grad.detach().clone(), "grad c0": leaves[1].grad.detach().clone()})
        errors = rel_errors(grads["impl"], grads["ref"])
        worst = max(errors, key=errors.get)
        tol = self.cfg.tolerance["float64"]
        passed = all(e <= tol for e in errors.values())
        if not passed:
            self.log(f"  FAILED gradient accumulation {impl} {config}: {worst} off by {errors[worst]:.3g}")
        return self.emit("check", "a", check="accumulate", impl=impl, reference="eager", config=config, depth=3,
                         dtype="float64", device=self.dev.type, passed=passed, tolerance=tol,
                         max_rel_error=errors[worst], worst=worst, errors=errors, affects_timing=False,
                         note="two backward passes on different inputs without zeroing; timing zeroes the "
                              "gradients before every run, so a failure here does not touch the timings")

    def audit_estimate(self) -> float:
        return (1.5 if self.dev.type == "cuda" else 0.5) * len(self.cfg.audit_configs) * len(self.cfg.audit_depths) * 2

    def unit_audit(self) -> None:
        from tlstm_bench.audit import audit_one

        for config in self.cfg.audit_configs:
            for depth in self.cfg.audit_depths:
                for impl in ("eager", "fast"):
                    res = audit_one(config, depth, implementation=impl, device=str(self.dev))
                    self.emit("audit", "a", implementation=impl, device=self.dev.type, **res.as_dict())
                    self.log(f"  audit {config} L={depth} {impl}: {res.verdict}")


def install_wrong_implementation() -> None:
    """Test hook: ``wrong-test`` = ``fast`` with its outputs scaled by 1.01 (a plausible, wrong path)."""
    from tlstm_bench.models import TLSTM_IMPLEMENTATIONS
    from tlstm_bench.models.fast_tlstm import run_fast

    def run_wrong(model, z, state):
        h_out, new_state = run_fast(model, z, state)
        return h_out * 1.01, new_state

    TLSTM_IMPLEMENTATIONS[INJECTED] = run_wrong

def install_failing_implementation(seq_len: int) -> None:
    """Test hook: ``failing-test`` = ``fast``, except that a timed run (batch 1, T = the timing
    T) kills its process, as a sticky CUDA error or a segfault would: it passes part a and
    must then fail alone in part b."""
    from tlstm_bench.models import TLSTM_IMPLEMENTATIONS
    from tlstm_bench.models.fast_tlstm import run_fast

    def run_failing(model, z, state):
        if z.shape[0] == 1 and z.shape[1] == seq_len:
            os.kill(os.getpid(), signal.SIGKILL)
        return run_fast(model, z, state)

    TLSTM_IMPLEMENTATIONS[FAILING] = run_failing

def prepare_process(wrong: bool = False, failing: bool = False, seq_len: int = 0) -> None:
    """First thing in every process that builds models (the worker, measure_cases' workers, the
    graph-step checks): the same registries and the same float32 everywhere."""
    import torch

    # (Triton is not imported here: ``triton`` is registered lazily by tlstm_bench.models, and
    # importing it costs every worker process seconds.)
    # Plain float32 (cuDNN's RNN would otherwise use TF32 while the tLSTM's matmuls do not):
    # the comparison is between algorithms, not precisions.
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    if wrong:
        install_wrong_implementation()
    if failing:
        install_failing_implementation(seq_len)

def rel_errors(got: dict, ref: dict) -> dict:
    """Name -> norm of the difference / norm of the reference (inf where missing or misshapen)."""
    errors = {}
    for name, r in ref.items():
        g = got.get(name)
        if r is None and g is None:
            continue
        if r is None or g is None or g.shape != r.shape:
            errors[name] = math.inf
            continue
        diff = float((g.double() - r.double()).norm())
        scale = float(r.double().norm())
        err = diff / scale if scale > 0 else diff
        errors[name] = err if math.isfinite(err) else math.inf
    return errors

def step_loss(run):
    """The loss of a StepRun's last call. A graphed step keeps it in its static output buffer;
    StepRun has no public name for it (yet), so it is read where tests/test_equivalence.py
    reads it. Any other step is recomputed (the same input, the same parameters)."""
    import torch

    last = getattr(run, "last_loss", None)
    if last is not None:
        return last.detach()
    step = getattr(run, "_step", None)
    if run.graphed and step is not None:
        return step.loss.detach()
    with torch.no_grad():
        return run.loss().detach()

def compare_graph_step(name: str, config: str, depth: int, opts: dict) -> dict:
    """``name`` (a graphed step) against ``eager`` as StepRuns in float64, same parameters
    (perturbed alike), on replay: new data copied into ``x`` and ``target`` after the capture."""
    import torch

    from tlstm_bench.timing import Case, StepRun

    dev = torch.device(opts["device"])

    def build(impl):
        return StepRun(Case(config, depth, impl), channels=opts["channels"], budget=None, vocab=opts["vocab"],
                       input_size=None, output_size=None, seq_len=opts["seq_len"], device=dev,
                       dtype=torch.float64, seed=opts["seed"])

    graphed, eager = build(name), build("eager")
    gen = torch.Generator().manual_seed(opts["seed"])
    with torch.no_grad():  # norm gains 1 / biases 0 would hide a swapped gain and bias
        for pg, pe in zip(graphed.model.parameters(), eager.model.parameters()):
            delta = (torch.randn(pg.shape, generator=gen, dtype=torch.float64) * 0.1).to(dev)
            pg.add_(delta)
            pe.add_(delta)
    graphed()  # the capture
    errors = {}
    for data in (1, 2):
        x = torch.randint(0, opts["vocab"], tuple(graphed.x.shape), generator=gen).to(dev)
        target = torch.randint(0, graphed.model.output_size, tuple(graphed.target.shape), generator=gen).to(dev)
        for run in (graphed, eager):
            run.x.copy_(x)
            run.target.copy_(target)
            run()
        got = {"loss": step_loss(graphed), **{f"grad {n}": g for n, g in graphed.gradients().items()}}
        ref = {"loss": step_loss(eager), **{f"grad {n}": g for n, g in eager.gradients().items()}}
        errors.update({f"{k} (replay {data})": e for k, e in rel_errors(got, ref).items()})
    return {"config": config, "depth": depth, "errors": errors,
            "passed": all(e <= opts["tolerance"] for e in errors.values())}

def context_broken(device: str) -> bool:
    """Whether this process's CUDA context is unusable (a sticky error); never on a CPU."""
    import torch

    if not device.startswith("cuda"):
        return False
    try:
        torch.ones(4, device=device).add_(1).sum().item()
        torch.cuda.synchronize()
        return False
    except Exception:  # noqa: BLE001 - any failure here means the context is gone
        return True

def graph_check_process(conn, name: str, items: list, opts: dict, prepare) -> None:
    """A spawned process: ``compare_graph_step`` for each (config, depth), each result sent as
    it is measured; it stops at a UserError (not available) or a broken CUDA context."""
    try:
        prepare()
        from tlstm_bench.errors import UserError

        for config, depth in items:
            conn.send(("start", (config, depth)))
            try:
                result = compare_graph_step(name, config, depth, opts)
            except UserError as exc:
                conn.send(("unavailable", str(exc)))
                return
            except Exception as exc:  # noqa: BLE001 - this case failed; the parent records it
                result = {"config": config, "depth": depth, "passed": False,
                          "error": f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=4)}"}
            conn.send(("result", result))
            if result.get("error") and context_broken(opts["device"]):
                return  # the parent starts a fresh process for the cases left
        conn.send(("done", None))
    finally:
        conn.close()

def run_graph_checks(name: str, items: list, opts: dict, timeout: float, prepare, tries: int = 3):
    """(results, None) or ([], why not available): ``graph_check_process`` in spawned processes,
    a new one for the cases left whenever one breaks (``tries`` processes at most)."""
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")  # never fork a process that may hold a CUDA context
    deadline, results, left = time.time() + timeout, [], list(items)
    for _ in range(tries):
        if not left:
            break
        conn, child = ctx.Pipe()
        proc = ctx.Process(target=graph_check_process, args=(child, name, left, opts, prepare), daemon=True)
        proc.start()
        child.close()
        current, status = None, "died"
        try:
            while conn.poll(max(0.0, deadline - time.time())):
                kind, payload = conn.recv()
                if kind == "start":
                    current = payload
                elif kind == "result":
                    results.append(payload)
                    left.remove((payload["config"], payload["depth"]))
                    current = None
                elif kind == "unavailable":
                    return [], payload
                else:
                    status = "done"
                    break
            else:
                status = "timeout"
        except (EOFError, OSError):
            pass  # the process died: its case fails, the rest go to a new process
        proc.join(5 if status != "timeout" else 0)
        if proc.is_alive():
            proc.kill()
            proc.join(5)
        conn.close()
        if status == "timeout":
            break
        if current is not None:
            why = f"the process died (exit code {proc.exitcode}) while checking this case"
            results.append({"config": current[0], "depth": current[1], "passed": False, "error": why})
            left.remove(current)
    results += [{"config": c, "depth": d, "passed": False, "error": "not checked: the checking processes broke "
                 "or ran out of time"} for c, d in left]
    return results, None
