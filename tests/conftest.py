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


@pytest.fixture
def cli_in_process(capsys, monkeypatch):
    """``meanfield ARGS`` in the folder ``cwd``: the CLI's ``main`` in this process, the memory
    check on, for a test whose subject is what a command prints, writes or refuses rather than
    its process (``tests/helpers/cli.py: cli`` starts one); a :class:`subprocess.CompletedProcess`
    with the exit code and both streams."""
    import subprocess

    from meanfield.cli import main

    monkeypatch.delenv("MEANFIELD_MEMORY_CHECK", raising=False)

    def command(args: list[str], cwd) -> subprocess.CompletedProcess:
        capsys.readouterr()
        with monkeypatch.context() as here:
            here.chdir(cwd)
            code = main(args)
        out, err = capsys.readouterr()
        return subprocess.CompletedProcess(["meanfield", *args], code, out, err)

    return command
