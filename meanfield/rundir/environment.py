"""Where and with what a run ran: versions, host, ranks, command, git revision.

Nothing here imports a package to learn its version (``importlib.metadata`` reads the
installed distributions): importing dolfinx or petsc4py initialises PETSc, which is
collective, so doing it on rank 0 alone would hang every other rank.
"""

from __future__ import annotations

import platform
import subprocess
import sys
import time
from importlib import metadata as importlib_metadata
from typing import Any

import numpy as np

#: Distributions whose versions a run records (those installed).
DISTRIBUTIONS = ("meanfield", "numpy", "scipy", "mpi4py", "petsc4py", "fenics-dolfinx", "dolfinx-solver-real",
                 "fenics-basix", "fenics-ffcx", "fenics-ufl", "meshio", "h5py", "h5netcdf", "xarray", "pandas", "ducc0",
                 "pot", "matplotlib")


def versions() -> dict[str, str]:
    """Versions of Python, the installed distributions a run depends on, and the MPI library."""
    out = {"python": sys.version.split()[0]}
    for dist in DISTRIBUTIONS:
        try:
            out[dist] = importlib_metadata.version(dist)
        except importlib_metadata.PackageNotFoundError:
            pass
    if "mpi4py.MPI" in sys.modules:
        from mpi4py import MPI

        out["mpi"] = MPI.Get_library_version().splitlines()[0].strip()
    if "dolfinx" in sys.modules:  # already imported by this run: reading it is free and safe
        out["dolfinx"] = str(sys.modules["dolfinx"].__version__)
    if "petsc4py.PETSc" in sys.modules:
        out["petsc"] = ".".join(map(str, sys.modules["petsc4py.PETSc"].Sys.getVersion()))
    return out


def git_revision() -> str | None:
    """The git revision of the working directory's repository, if any (``-dirty`` if modified)."""
    try:
        rev = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    if rev.returncode != 0:
        return None
    return rev.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")


def run_environment(comm) -> dict[str, Any]:
    """Facts about where and how a run runs, for metadata.json (gathered on rank 0, collective)."""
    facts = None
    if comm.rank == 0:
        facts = {
            "ranks": comm.size,
            "host": platform.node(),
            "platform": platform.platform(),
            "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "command": list(sys.argv),
            "git_revision": git_revision(),
            "versions": versions(),
        }
    return comm.bcast(facts, root=0)


def stack_report(comm) -> dict[str, Any]:
    """What ``meanfield info`` prints: versions and capabilities of the numerical stack (collective).

    Imports dolfinx on every rank (its PETSc initialisation is collective), then reports the
    PETSc scalar type, whether dolfinx has ADIOS2, h5py's HDF5, the rank count, and the BLAS
    libraries of the process, each once, with the threads a run uses: the thread limit is set
    here as a run sets it (``MEANFIELD_NUM_THREADS``, else 1; a config's ``[nonlocal] threads``
    wins in a run).
    """
    from .._fem import dolfinx

    dfx = dolfinx()
    from petsc4py import PETSc

    report: dict[str, Any] = {"versions": versions(), "mpi_ranks": comm.size,
                              "petsc_scalar_type": str(np.dtype(PETSc.ScalarType)),
                              "dolfinx_adios2": bool(getattr(dfx, "has_adios2", False))}
    try:
        import h5py

        report["h5py_hdf5"] = h5py.version.hdf5_version
    except ImportError:
        report["h5py_hdf5"] = None
    from ..threads import blas_libraries, configure_threads

    report["threads_per_rank"] = configure_threads()
    report["blas"] = blas_libraries()
    return report
