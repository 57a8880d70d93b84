"""MPI jobs as users start them: ``mpirun -n P meanfield ...`` in a fresh process.

``mpirun`` is found as a user's shell would find the one that matches this Python's mpi4py:
the ``MEANFIELD_MPIRUN`` environment variable if set, else the bin folder of this Python (a
venv with the ``mpich`` wheel), else the bin folder of the environment it was made from (a
venv on top of a conda environment), else ``PATH``.  A test that needs one and finds none
fails with :data:`MISSING`; ``python tests/helpers/mpi.py`` prints the one found (``make test``
checks this first).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

#: The environment variable naming the mpirun to use.
OVERRIDE = "MEANFIELD_MPIRUN"
#: Seconds an MPI job of the tests may take before it is killed.
TIMEOUT = 180
MISSING = (f"no mpirun found (${OVERRIDE}, the bin folder of {sys.executable}, PATH): install MPICH into this "
           "environment (`pip install mpich`, or `conda install -c conda-forge mpich`) or set "
           f"{OVERRIDE}=/path/to/mpirun (the MPI that mpi4py was built with)")


class MpirunError(RuntimeError):
    """No usable mpirun (the message says how to get one)."""


def _executable(path: Path) -> bool:
    return path.is_file() and os.access(path, os.X_OK)


def find_mpirun() -> Path:
    """The mpirun to start MPI jobs with (see the module docstring).

    Raises
    ------
    MpirunError
        ``MEANFIELD_MPIRUN`` names no executable file, or no mpirun was found.
    """
    override = os.environ.get(OVERRIDE)
    if override:
        path = Path(override).expanduser()
        if not _executable(path):
            raise MpirunError(f"{OVERRIDE}={override} is not an executable file")
        return path
    for folder in dict.fromkeys([Path(sys.executable).parent, Path(sys.base_prefix) / "bin"]):
        if _executable(folder / "mpirun"):
            return folder / "mpirun"
    found = shutil.which("mpirun")
    if found is None:
        raise MpirunError(MISSING)
    return Path(found)


def mpirun() -> Path:
    """The mpirun for a test that starts MPI jobs: the test fails (one line) when there is none,
    and is skipped inside an MPI job (no mpirun inside mpirun; it runs in the serial pass)."""
    import pytest
    from mpi4py import MPI

    if MPI.COMM_WORLD.size > 1:
        pytest.skip("starts its own MPI jobs: runs in the serial pass")
    try:
        return find_mpirun()
    except MpirunError as exc:
        pytest.fail(str(exc), pytrace=False)


def meanfield_job(*args: str, ranks: int = 2, patch: str = "", timeout: float = TIMEOUT,
                  cwd: Path | None = None) -> subprocess.CompletedProcess:
    """``mpirun -n ranks meanfield args``, the CLI run through ``python -c`` after ``patch``; a
    job still running after ``timeout`` seconds is killed and fails the test with its output."""
    import pytest

    try:
        return subprocess.run(job_command(*args, ranks=ranks, patch=patch), capture_output=True, text=True,
                              timeout=timeout, cwd=cwd)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"meanfield {' '.join(args)} on {ranks} ranks still running after {timeout} s\n"
                    f"stdout:\n{_text(exc.stdout)}\nstderr:\n{_text(exc.stderr)}", pytrace=False)


def _text(output: bytes | str | None) -> str:
    return output.decode(errors="replace") if isinstance(output, bytes) else output or ""


def job_command(*args: str, ranks: int = 2, patch: str = "") -> list[str]:
    """The command line of :func:`meanfield_job` (to start it with :class:`subprocess.Popen`)."""
    code = f"import sys\n{patch}\nfrom meanfield.cli import main\nsys.exit(main({list(args)!r}))\n"
    return [str(mpirun()), "-n", str(ranks), sys.executable, "-c", code]


if __name__ == "__main__":
    try:
        print(find_mpirun())
    except MpirunError as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(1)
