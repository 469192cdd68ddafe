"""Sweeps: a TOML spec expanded into cells, each cell run in its own process, one record per cell.

A spec (``sweeps/<name>.toml``, see :mod:`tlstm_bench.sweeps.spec`) names a task, the
configurations, depths, seeds, the budget or the channel size, a training preset and the
timing settings. It expands into *cells*: one training run (``kind = "train"``) or one runtime
measurement (``kind = "runtime"``) of one configuration at one depth and one seed (and, for
runtime, one implementation). Each cell runs isolated in a subprocess with a timeout, and
writes exactly one record.

Record schema (what ``tlstm-bench results`` and ``tlstm-bench plot`` read)
--------------------------------------------------------------------------
Records live in the results store (:mod:`tlstm_bench.results`): collection = the sweep name
(``results/store/<sweep>/<cell id>.json``), written atomically with
``write_record(rec, sweep_name, root=..., record_id=cell_id)``. Top-level keys:

identity
    ``id``            the cell id: hash of ``key`` and the code version (below)
    ``key``           hash of the cell's spec alone (same across code versions: group by it
                      and keep the newest ``date`` to get one record per cell)
    ``code_version``  the code version that went into ``id``
    ``sweep``         the sweep name (e.g. ``"quick"``); ``collection`` is the same
    ``kind``          ``"runtime"`` or ``"train"``
    ``task``          the task (``wiki``, ``addition``, ``memorization``, ``mnist``, ``pmnist``, ...);
                      for runtime cells the sweep's task, or ``"runtime"`` for a runtime-only sweep
    ``config``, ``depth``, ``seed``
    ``channels``, ``params``   the channel size M actually used and the parameter count (null if
                      the cell failed before building the model)
    ``budget``        the budget asked for (string like ``"10M"``/``"slstm:100"``) or null
    ``status``        ``"ok"`` or ``"failed"``;  ``error``: a one-line reason (str) or null
    ``spec``          the cell's full spec dict (everything that determines its result)
    ``wall_time_s``   seconds the cell's process ran (set by the runner)
train cells (copied from ``tlstm_bench.training.train``'s result)
    ``metric`` (``"bpc"`` | ``"accuracy"``), ``valid_metric``, ``test_metric``,
    ``samples_to_solve`` (null if never solved), ``samples_seen``, ``solved``, ``preset``
runtime cells (copied from ``tlstm_bench.timing.measure_runtime``'s result)
    ``ms_per_step`` (median), ``ms_iqr``, ``samples`` (raw ms per step, one per repeat),
    ``implementation``, ``seq_len``, ``repeats``
provenance
    ``git_commit``, ``git_dirty``, ``torch_version``, ``device`` (``cpu``/``cuda``),
    ``device_name``, ``threads``, ``host``, ``date`` (UTC ISO 8601), ``slurm_job_id`` (the
    SLURM job that ran the cell, ``"<array id>_<task>"`` for ``--executor slurm``; null outside SLURM)

A failed cell has the same identity keys, ``status = "failed"``, ``error`` set, and the metric
keys null or absent. Any further keys the timing or training functions return are kept.

The code version
----------------
``code_version`` is the git commit of the checkout; on a dirty tree it is
``<commit>+dirty.<hash>`` where the hash covers the uncommitted changes to ``tlstm_bench/``
(tracked diffs and untracked files), so editing the package makes new cells but editing a
README does not; outside git it is ``pkg-<version>``. ``$TLSTM_BENCH_CODE_VERSION`` overrides it
(to pin ids across a change you know does not alter results).
"""
