"""Particle simulator: n interacting tokens on S^{d-1} (any d >= 2), MPI-distributed.

The finite-n system the PDE is the mean-field limit of (``MODEL.md``): samplers for the
initial densities, RK4 with projection onto the sphere, the tokens' side of a mask
(:mod:`.positions`; the causal mask's token field is its own, :mod:`meanfield.masks`).  This
package is numerics only: the run driver behind ``meanfield particles`` is
:mod:`meanfield.drivers.particles`.  Diagnostics of a particle run (pairwise inner products, cluster
counts) are an analysis of its directory (:mod:`meanfield.analysis.diagnostics`).
Importing this package does not import dolfinx.
"""

from .integrator import advance, rk4_step
from .sampling import SAMPLERS, sample_initial
from .system import ParticleSystem, attention_field, default_dt, token_block

__all__ = [
    "SAMPLERS",
    "ParticleSystem",
    "advance",
    "attention_field",
    "default_dt",
    "rk4_step",
    "sample_initial",
    "token_block",
]
