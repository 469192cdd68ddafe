"""Looking inside trained models: the memory-cell trace behind ``tlstm-bench visualize``."""

from .trace import CellTrace, diagonal_channel_mean, diagonal_indices, trace_cells

__all__ = ["CellTrace", "diagonal_channel_mean", "diagonal_indices", "trace_cells"]
