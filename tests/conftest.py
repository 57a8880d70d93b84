"""Shared fixtures.

Tests marked ``mpi`` are collective: they run in the serial suite and again under
``mpirun -n 2`` (``make test-mpi``).  Those that compare a computation on all ranks with
the same one on a single rank take the ``parallel_comm`` fixture, which skips them in the
serial pass, where the comparison would be a run against itself."""

from __future__ import annotations

import numpy as np
import pytest


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(20261122)


@pytest.fixture
def comm():
    from mpi4py import MPI

    return MPI.COMM_WORLD


@pytest.fixture
def parallel_comm():
    """COMM_WORLD when it has several ranks; the test is skipped in a serial run."""
    from mpi4py import MPI

    if MPI.COMM_WORLD.size == 1:
        pytest.skip("compares all ranks with one rank: runs under mpirun -n 2 (make test-mpi)")
    return MPI.COMM_WORLD


@pytest.fixture
def tmp_path(request, tmp_path_factory):
    """One temporary folder per test shared by all MPI ranks: rank 0 makes it (under its own
    --basetemp) and broadcasts the path, so collective runs write and read the same files."""
    from pathlib import Path

    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    path = str(tmp_path_factory.mktemp(request.node.name[:40], numbered=True)) if comm.rank == 0 else None
    return Path(comm.bcast(path, root=0))
