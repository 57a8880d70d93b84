"""The token positions ``s`` along the sequence: the one formula ``s_k = (k + 1/2) / M``.

A causal run's PDE keeps M position slices, a causal particle run n tokens; both sit at the
midpoints of M (or n) equal parts of [0, 1] (the midpoint rule of the causal sums,
:mod:`meanfield.masks.causal_slices`).  Imports nothing of the package: the PDE, the tokens and the
run-directory format (which writes and reads the ``position`` coordinate) all take it from here.
"""

from __future__ import annotations

import numpy as np


def position(index: int | np.ndarray, count: int) -> float | np.ndarray:
    """The position ``(index + 1/2) / count`` of slice (token) ``index`` of ``count``."""
    return (index + 0.5) / count


def slice_positions(slices: int) -> np.ndarray:
    """The positions ``s_k = (k + 1/2) / M`` of ``M = slices`` slices (midpoint rule)."""
    if slices < 1:
        raise ValueError(f"positions.slices: {slices!r}; it must be an integer >= 1")
    return np.asarray(position(np.arange(slices), slices))
