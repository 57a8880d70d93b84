"""Import dolfinx (and friends) the way every machine here needs it.

The PyPI wheel ``dolfinx-solver-real`` ships PETSc, MPI and dolfinx together and must be
imported before dolfinx or petsc4py; on a conda-forge fenics-dolfinx that module does not
exist and nothing needs doing.  Importing dolfinx is slow, so callers import it lazily
through :func:`dolfinx`.

PETSc installs its own handlers for SIGTERM, SIGINT, ... when it is initialised, and they
call ``MPI_Abort``; a run must instead finish its step and write a checkpoint, so
``-no_signal_handler`` is added to ``PETSC_OPTIONS`` before the first import (the run
controller installs its own handlers when a run starts).  Importing dolfinx initialises
PETSc, which is collective: every rank must import it, or none.
"""

from __future__ import annotations

import importlib
import os
import time
from types import ModuleType

NO_SIGNAL_HANDLER = "-no_signal_handler"


_IMPORT_SECONDS: list[float] = []  # how long this process's first call took


def dolfinx() -> ModuleType:
    """Return the dolfinx module, importing ``dolfinx_solver`` first when installed."""
    tic = time.perf_counter()
    options = os.environ.get("PETSC_OPTIONS", "")
    if NO_SIGNAL_HANDLER not in options.split():
        os.environ["PETSC_OPTIONS"] = f"{options} {NO_SIGNAL_HANDLER}".strip()
    importlib.import_module("mpi4py.MPI")
    try:
        importlib.import_module("dolfinx_solver")
    except ImportError:
        pass
    module = importlib.import_module("dolfinx")
    if not _IMPORT_SECONDS:
        _IMPORT_SECONDS.append(time.perf_counter() - tic)
    return module


def import_seconds() -> float:
    """Seconds this process took to import dolfinx (and MPI and PETSc) at its first :func:`dolfinx`."""
    dolfinx()
    return _IMPORT_SECONDS[0]
