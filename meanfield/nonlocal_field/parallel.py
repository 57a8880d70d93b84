"""MPI helpers shared by the evaluators (a ``None`` communicator means serial)."""

from __future__ import annotations

import numpy as np


def allgather_rows(comm, local: np.ndarray) -> np.ndarray:
    """Concatenate every rank's rows of ``local`` in rank order, on every rank.

    One ``Allgatherv``; ``local`` is a float64 array of shape (n_local,) or (n_local, k).
    """
    if comm is None or comm.size == 1:
        return local
    from mpi4py import MPI

    row = int(np.prod(local.shape[1:], dtype=int))
    counts = np.asarray(comm.allgather(local.shape[0] * row), dtype=int)
    out = np.empty((int(counts.sum()) // max(row, 1),) + local.shape[1:], dtype=local.dtype)
    displs = np.concatenate(([0], np.cumsum(counts)[:-1]))
    comm.Allgatherv(np.ascontiguousarray(local), [out, counts, displs, MPI.DOUBLE])
    return out


def allreduce_sum(comm, local: np.ndarray) -> np.ndarray:
    """Element-wise sum of ``local`` (float64) over all ranks, on every rank: one ``Allreduce``."""
    if comm is None or comm.size == 1:
        return local
    from mpi4py import MPI

    out = np.empty_like(local)
    comm.Allreduce(np.ascontiguousarray(local), out, op=MPI.SUM)
    return out
