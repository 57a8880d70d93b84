"""Point masses (atoms) beside the density: mu = rho dx + sum_i m_i delta_{x_i}.

A cluster that has collapsed below the mesh scale is carried as an atom of the same mass; the
measure ``mu`` is an exact solution class of the continuity equation with the smooth attention
kernel, each atom moving with the velocity field of the whole measure.
"""

from ..point_masses import ATOM_KEYS, Atoms

__all__ = ["ATOM_KEYS", "Atoms"]
