"""meanfield: the mean-field PDE of self-attention dynamics on meshed spheres.

The Python API mirrors the CLI::

    import meanfield
    cfg = meanfield.load_config("runs/examples/s2-clustering.toml", ["time.t_final=2"])
    result = meanfield.run(cfg, out="runs/short")   # same as `meanfield run ...`, also under mpirun
    result = meanfield.resume("runs/short", t_final=4.0)
    result = meanfield.load_run("runs/short")
    ds = result.to_xarray()                         # the run as an xarray Dataset (like runs/short/run.nc)
    meanfield.sweep(cfg, ["model.beta=1,4"], out="runs/beta")   # same as `meanfield sweep ...`
    table = meanfield.collect(["runs/beta"])        # observables of many runs, a pandas DataFrame
    meanfield.response(cfg, ["z"], [1.0, 2.0])       # values, influence functions, n_var (the adjoint)
    meanfield.fit(cfg, ["model.layers[*].V"], ["exp(3*x)"])  # fit weights so rho(T) meets a target
    meanfield.retrieval(causal_cfg, [1.0], codewords=8)  # a causal run's retrieval profile R(t; s0)
    meanfield.phase(cfg, betas=[1, 4], times=[1, 5], ds=[128])  # clustering phase diagram of prompt batches

Importing this package is cheap: dolfinx and MPI are imported when a run starts.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from .version import __version__ as __version__

# library convention: no output unless the application (or a run, on rank 0) attaches handlers
logging.getLogger(__name__).addHandler(logging.NullHandler())

__all__ = ["load_config", "run", "resume", "load_run", "run_particles", "sweep", "collect", "response",
           "retrieval", "fit", "phase", "AttentionModel", "Config", "Problem", "RunResult", "PDERunResult",
           "ParticleRunResult", "RunInterrupted", "StopRun", "OutputState"]

_LAZY = {
    "load_config": ("config", "load_config"),
    "Config": ("config", "Config"),
    "Problem": ("problem", "Problem"),
    "run": ("drivers.pde", "run"),
    "resume": ("studies.particle_runs", "resume"),
    "run_particles": ("studies.particle_runs", "run_particles"),
    "load_run": ("rundir.results", "load_run"),
    "sweep": ("studies.sweep", "sweep"),
    "collect": ("analysis.collect", "collect"),
    "response": ("studies.response", "response"),
    "retrieval": ("studies.retrieval", "retrieval"),
    "fit": ("training.fit", "fit"),
    "phase": ("studies.phase", "phase"),
    "RunResult": ("rundir.results", "RunResult"),
    "PDERunResult": ("rundir.results", "PDERunResult"),
    "ParticleRunResult": ("rundir.results", "ParticleRunResult"),
    "RunInterrupted": ("engine.controller", "RunInterrupted"),
    "StopRun": ("engine.callbacks", "StopRun"),
    "OutputState": ("engine.callbacks", "OutputState"),
    "AttentionModel": ("model", "AttentionModel"),
}

if TYPE_CHECKING:
    from .analysis.collect import collect
    from .config import Config, load_config
    from .drivers.pde import run
    from .engine.callbacks import OutputState, StopRun
    from .engine.controller import RunInterrupted
    from .model import AttentionModel
    from .problem import Problem
    from .rundir.results import ParticleRunResult, PDERunResult, RunResult, load_run
    from .studies.particle_runs import resume, run_particles
    from .studies.phase import phase
    from .studies.response import response
    from .studies.retrieval import retrieval
    from .studies.sweep import sweep
    from .training.fit import fit


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        return getattr(importlib.import_module(f".{module}", __name__), attr)
    raise AttributeError(f"module 'meanfield' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
