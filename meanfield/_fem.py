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
_PRELUDE_SECONDS: list[float] = []  # how long this process had run before its first call


def dolfinx() -> ModuleType:
    """Return the dolfinx module, importing ``dolfinx_solver`` first when installed."""
    tic = time.perf_counter()
    if not _PRELUDE_SECONDS:
        _PRELUDE_SECONDS.append(_process_age())
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


def prelude_seconds() -> float:
    """Seconds this process had run before its first :func:`dolfinx` (the interpreter's start and
    the imports of ``meanfield`` and its command line), from Linux's ``/proc``; 0 elsewhere."""
    dolfinx()
    return _PRELUDE_SECONDS[0]


def _process_age() -> float:
    """Seconds since this process started (``/proc/self/stat``'s start time against
    ``/proc/uptime``); 0 where unknown."""
    try:
        with open("/proc/self/stat") as stat, open("/proc/uptime") as uptime:
            started = int(stat.read().rsplit(")", 1)[1].split()[19]) / os.sysconf("SC_CLK_TCK")
            return max(float(uptime.read().split()[0]) - started, 0.0)
    except (OSError, ValueError, IndexError):
        return 0.0
