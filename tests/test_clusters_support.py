"""Run data for the cluster tests (no test here): PDE runs read back from their directories."""

from __future__ import annotations

import tempfile

from meanfield.runner.results import RunResult


def pde_result(config, times) -> RunResult:
    """A serial PDE run of ``config`` with outputs at ``times``, read back by ``load_run``
    (DG1 runs carry ``vertex_densities``)."""
    from mpi4py import MPI

    import meanfield
    from meanfield.config import Config, load_config

    config = config if isinstance(config, Config) else load_config(config)
    time = {**config.data["time"], "t_final": float(times[-1]), "outputs": [float(t) for t in times]}
    data = {**config.data, "time": time, "output": {**config.data["output"], "xdmf": False}}
    return meanfield.run(load_config(data), out=tempfile.mkdtemp(prefix="meanfield-clusters-") + "/run",
                         comm=MPI.COMM_SELF, quiet=True)
