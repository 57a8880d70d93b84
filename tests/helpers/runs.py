"""Real runs for tests that analyse their results."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from meanfield.config import Config
from meanfield.rundir.results import PDERunResult


def pde_result(config: Config | Mapping[str, Any], times: Sequence[float], out: Path) -> PDERunResult:
    """A serial PDE run of ``config`` with outputs at ``times`` (no ParaView files) written to
    ``out`` (a folder that does not exist yet), read back by ``load_run`` (DG1 runs carry
    ``vertex_densities``)."""
    from mpi4py import MPI

    import meanfield
    from meanfield.config import load_config

    config = config if isinstance(config, Config) else load_config(config)
    time = {**config.data["time"], "t_final": float(times[-1]), "outputs": [float(t) for t in times]}
    data = {**config.data, "time": time, "output": {**config.data["output"], "xdmf": False}}
    return meanfield.run(load_config(data), out=out, comm=MPI.COMM_SELF, quiet=True)
