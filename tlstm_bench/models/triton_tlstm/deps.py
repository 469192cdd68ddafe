"""Which programs a program of the persistent kernels reads from, for the step flags
(``common.step_flags``; the menu entries with ``sync="flags"``).

Step s of a program reads values that step s - 1 (forward) or s + 1 (backward) wrote, at some
rows (one row: one location of one example) and across every channel tile (h is recomputed
from c and o over all input channels; CN's and LN's statistics and the backward's partial sums
combine every channel tile's). Per location, the rows read at the neighbouring step:

- forward: the window's hidden locations (``hidden_index`` slots >= HIDDEN_OFFSET), the memory
  cell's (``cell_index``, with the memory-cell convolution) and its own;
- backward: the inverse hidden map's readers (``inv_hidden``), the windows that read its cell
  (``inv_cell`` entries // Kd, with the memory-cell convolution) and its own;
- with LN, every location of the example (its statistics and backward sums are the example's).

A program owns a tile of rows: unfolded, locations ``i*BN ..`` of example ``b`` at grid
(b, i, j); folded, rows ``i*BN ..`` of the flattened (example, location) rows at (0, i, j). Its
id is ``p0 + g0 * (p1 + g1 * j)`` over the grid (g0, g1, g2), as ``common.program_id_flat``.
The table has one row a program: its producers' ids, -1 padded to a power of two (DEPW).
"""

from __future__ import annotations

import torch
import triton

from ..tlstm import HIDDEN_OFFSET


def location_reads(hidden_index, cell_index, inv_hidden, inv_cell, kd: int, backward: bool,
                   memory_conv: bool, norm: str) -> list[set[int]]:
    """Per location, the locations of the same example whose neighbouring step it reads."""
    n = len(hidden_index)
    if norm == "ln":
        return [set(range(n)) for _ in range(n)]
    out = []
    for loc in range(n):
        reads = {loc}
        if backward:
            reads |= {t for t in inv_hidden[loc] if t >= 0}
            if memory_conv:
                reads |= {e // kd for e in inv_cell[loc] if e >= 0}
        else:
            reads |= {slot - HIDDEN_OFFSET for slot in hidden_index[loc] if slot >= HIDDEN_OFFSET}
            if memory_conv:
                reads |= set(cell_index[loc])
        out.append(reads)
    return out


def row_tiles(grid: tuple, batch: int, n: int, bn: int, fold: bool) -> list[tuple[tuple, list[int]]]:
    """((p0, p1), the rows b * N + loc of the tile) of every row tile of the grid."""
    if fold:
        return [((0, i), list(range(i * bn, min((i + 1) * bn, batch * n)))) for i in range(grid[1])]
    return [((b, i), [b * n + loc for loc in range(i * bn, min((i + 1) * bn, n))])
            for b in range(batch) for i in range(grid[1])]


def tile_of(row: int, n: int, bn: int, fold: bool) -> tuple[int, int]:
    """(p0, p1) of the row tile that holds a row."""
    return (0, row // bn) if fold else (row // n, (row % n) // bn)


def tile_reads(reads: list[set[int]], grid: tuple, batch: int, n: int, bn: int, fold: bool) -> dict:
    """{(p0, p1): the row tiles its rows read} over the grid's row tiles."""
    out = {}
    for key, rows in row_tiles(grid, batch, n, bn, fold):
        tiles = set()
        for row in rows:
            b, loc = divmod(row, n)
            tiles |= {tile_of(b * n + t, n, bn, fold) for t in reads[loc]}
        out[key] = tiles
    return out


def program_id(grid: tuple, p0: int, p1: int, j: int) -> int:
    return p0 + grid[0] * (p1 + grid[1] * j)


def producer_table(reads: list[set[int]], grid: tuple, batch: int, n: int, bn: int, fold: bool) -> torch.Tensor:
    """(programs, DEPW) int32: row ``program_id`` holds the ids of the programs it reads from
    (every channel tile of every row tile its rows read), sorted, -1 padded; DEPW is the
    widest row rounded up to a power of two (the kernels' constexpr)."""
    table = [[] for _ in range(grid[0] * grid[1] * grid[2])]
    for (p0, p1), tiles in tile_reads(reads, grid, batch, n, bn, fold).items():
        producers = sorted(program_id(grid, q0, q1, j) for q0, q1 in tiles for j in range(grid[2]))
        for j in range(grid[2]):
            table[program_id(grid, p0, p1, j)] = producers
    width = triton.next_power_of_2(max(len(r) for r in table))
    return torch.tensor([r + [-1] * (width - len(r)) for r in table], dtype=torch.int32)


def tables(geo) -> tuple[torch.Tensor, torch.Tensor]:
    """(forward, backward) producer tables of a ``launch.Geometry``, on the host."""
    hidx, cidx = geo.hidden_index.tolist(), geo.cell_index.tolist()
    invh, invc = geo.inv_hidden.tolist(), geo.inv_cell.tolist()
    fold, bn = geo.tiles["FOLD"], geo.tiles["BN"]
    out = []
    for backward in (False, True):
        reads = location_reads(hidx, cidx, invh, invc, geo.kd, backward, geo.memory_conv, geo.norm)
        out.append(producer_table(reads, geo.grid, geo.batch, geo.n, bn, fold))
    return out[0], out[1]
