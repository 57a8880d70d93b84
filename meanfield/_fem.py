"""Import dolfinx (and friends) the way every machine here needs it.

The PyPI wheel ``dolfinx-solver-real`` ships PETSc, MPI and dolfinx together and must be
imported before dolfinx or petsc4py; on a conda-forge fenics-dolfinx that module does not
exist and nothing needs doing.  Importing dolfinx is slow, so callers import it lazily
through :func:`dolfinx`.
"""

from __future__ import annotations

import importlib
from types import ModuleType


def dolfinx() -> ModuleType:
    """Return the dolfinx module, importing ``dolfinx_solver`` first when installed."""
    try:
        importlib.import_module("dolfinx_solver")
    except ImportError:
        pass
    return importlib.import_module("dolfinx")
