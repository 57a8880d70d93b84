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
from types import ModuleType

NO_SIGNAL_HANDLER = "-no_signal_handler"


def dolfinx() -> ModuleType:
    """Return the dolfinx module, importing ``dolfinx_solver`` first when installed."""
    options = os.environ.get("PETSC_OPTIONS", "")
    if NO_SIGNAL_HANDLER not in options.split():
        os.environ["PETSC_OPTIONS"] = f"{options} {NO_SIGNAL_HANDLER}".strip()
    importlib.import_module("mpi4py.MPI")
    try:
        importlib.import_module("dolfinx_solver")
    except ImportError:
        pass
    return importlib.import_module("dolfinx")
