"""GPU evidence (issue 8): one prepared device run under one time budget.

    PYTHONPATH=. python3 benchmarks/gpu_evidence.py --out OUT --budget-s 420 --commit SHA
    PYTHONPATH=. python3 benchmarks/gpu_evidence.py --out /tmp/ev --device cpu --tiny   # dry run, minutes

What it measures (docs/gpu-evidence.md has the reasoning and the time estimates), in this
order (the most important first, so that a budget cut loses the least):

d. first: the regress baseline for this device (``regress --update``'s file,
   ``baseline-<device kind>.json``), so it is never cut.
a. correctness on the device: every registered implementation against its oracle
   (tLSTM: ``eager``; sLSTM: ``loop``) in float32 and float64, outputs, final state and
   every gradient, every configuration at L = 1 and 3; gradient accumulation over two
   backward passes; ``cuda-graph`` as a whole step (StepRun) against ``eager`` on replay,
   in processes of its own; the separability audit for 2d and 3d-cn.
b. runtime through ``measure_cases`` (SPEC section 8; batch 1, T = 100): one call per
   configuration (its depths and implementations interleaved, each implementation in a
   process of its own, a failure recorded as that implementation's), at M = 100 and at
   the Wikipedia size (10M parameters, 205 symbols), every registered implementation,
   with the kernels per timestep (torch profiler) and a loss/gradient fingerprint.
c. training at the paper's sizes (memorization, addition; 3d-cn, then the sLSTM) through
   ``train()``, resumed chunk by chunk from a checkpoint so that the time cap holds.
e. last, its time kept back from the start: three of b's cases re-timed through
   ``python -m tlstm_bench time`` and the ratio script / time recorded (issue 23: 10%).

Each unit of work is started only if its estimate fits in what is left, and a timing
call also checks before each round.

Files in --out (at most 8): records.jsonl (one JSON record a line, appended and
flushed as it goes; every record has a ``provenance`` block), log.txt, summary.md,
runtime_m100.png, runtime_wiki.png, training.png, baseline-<device kind>.json.

Processes: this process (the supervisor) never imports torch. It starts a worker (this
script with --worker) that measures. If the worker dies (a sticky CUDA error, a
segfault), the supervisor records the unit it died in and starts a new worker, which
skips every unit the records show finished. SIGTERM or Ctrl-C: the worker stops, the
supervisor writes the summary and figures from what was measured (exit 143 / 130).
Exit 0: complete or stopped by the budget (the summary says which); 3: finished, but a
worker crashed in some unit (the records say which); 2: bad arguments.

The package (``benchmarks/gpu_evidence.py`` is its one command):

* ``common``: the names, the clock and the two files (records, log) every part shares;
* ``settings``: the device run's sizes and the dry run's;
* ``plan``: the plan and its budget (the cost model, the budget, what earlier units found);
* ``correctness``: part a; ``timing``: parts b, d and e through the one timing API;
  ``training``: part c; ``worker``: the process that runs them, unit by unit;
* ``summary`` and ``figures``: what the supervisor writes from the records;
* ``supervisor``: starts the worker, restarts it if it dies; ``cli``: the command line.
"""
