"""Particle simulator: n interacting tokens on S^{d-1} (any d >= 2), MPI-distributed.

The finite-n system the PDE is the mean-field limit of (``MODEL.md``): samplers for the
initial densities, RK4 with projection onto the sphere, the run driver behind
``meanfield particles`` and diagnostics (pairwise inner products, cluster counts).
Importing this package does not import dolfinx.
"""

from .diagnostics import count_clusters, inner_product_histogram, write_diagnostics
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
    "count_clusters",
    "default_dt",
    "inner_product_histogram",
    "rk4_step",
    "run_particles",
    "sample_initial",
    "token_block",
    "write_diagnostics",
]
