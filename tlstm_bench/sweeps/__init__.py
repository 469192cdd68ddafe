"""Sweeps: a TOML spec expanded into cells, each cell run in its own process, one record per cell.

A spec (shipped: ``tlstm_bench/sweeps/specs/<name>.toml``, or any path; see
:mod:`tlstm_bench.sweeps.spec`) names a task, the configurations, depths, seeds, the budget
or the channel size, a training preset and the timing settings. It expands into *cells*
(:mod:`.grid`): one training run (``kind = "train"``) or one runtime measurement
(``kind = "runtime"``) of one configuration at one depth and one seed (and, for runtime,
one implementation). :mod:`.plan` plans a sweep (which cells are done) and runs it; each cell
runs isolated in a subprocess with a timeout (:mod:`.runner` here, :mod:`.slurm` as SLURM jobs;
the process is :mod:`.cell`) and writes exactly one record into the store,
``<store>/<sweep>/<cell id>.json``.

What a record holds is the results layer's schema (:mod:`tlstm_bench.results.schema`,
``docs/results.md``); a cell adds ``sweep``, ``spec`` (its full settings), ``key`` (a
hash of ``spec``) and ``id`` (a hash of ``key`` and the code version: a hash of the
package's source, so a commit that changes no code leaves a finished cell finished).
"""
