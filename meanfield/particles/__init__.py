"""Particle simulator: n interacting tokens on S^{d-1} (any d >= 2), MPI-distributed.

The finite-n system the PDE is the mean-field limit of (``MODEL.md``): samplers for the
initial densities, RK4 with projection onto the sphere, the run driver behind
``meanfield particles``.  Diagnostics of a particle run (pairwise inner products, cluster
counts) are an analysis of its directory (:mod:`meanfield.analysis.diagnostics`).
Importing this package does not import dolfinx.
"""

from .integrator import advance, rk4_step
from .run import ParticleSimulation, build_particles, run_particles
from .sampling import SAMPLERS, sample_initial
from .system import ParticleSystem, attention_field, default_dt, token_block

__all__ = [
    "SAMPLERS",
    "ParticleSimulation",
    "ParticleSystem",
    "advance",
    "attention_field",
    "build_particles",
    "default_dt",
    "rk4_step",
    "run_particles",
    "sample_initial",
    "token_block",
]
