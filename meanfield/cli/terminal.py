"""What the command line prints: on rank 0 only, whether or not MPI has started."""

from __future__ import annotations

import os
import sys


def rank() -> int:
    """This process's MPI rank, read from the launcher's environment while MPI has not started."""
    if "mpi4py.MPI" not in sys.modules:
        for var in ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK"):
            if var in os.environ:
                return int(os.environ[var])
        return 0
    from mpi4py import MPI

    return MPI.COMM_WORLD.rank


def echo(*args) -> None:
    """Print to standard output on rank 0."""
    if rank() == 0:
        print(*args, flush=True)


def error(text: str) -> None:
    """Print to standard error on rank 0."""
    if rank() == 0:
        print(text, file=sys.stderr, flush=True)
