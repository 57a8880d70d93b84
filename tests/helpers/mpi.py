"""MPI jobs as users start them: ``mpirun -n P meanfield ...`` in a fresh process."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

MPIRUN = Path(sys.executable).parent / "mpirun"
#: Seconds an MPI job of the tests may take before it is killed.
TIMEOUT = 180


def meanfield_job(*args: str, ranks: int = 2, patch: str = "", timeout: float = TIMEOUT,
                  cwd: Path | None = None) -> subprocess.CompletedProcess:
    """``mpirun -n ranks meanfield args``, the CLI run through ``python -c`` after ``patch``."""
    code = f"import sys\n{patch}\nfrom meanfield.cli import main\nsys.exit(main({list(args)!r}))\n"
    return subprocess.run([str(MPIRUN), "-n", str(ranks), sys.executable, "-c", code], capture_output=True,
                          text=True, timeout=timeout, cwd=cwd)
