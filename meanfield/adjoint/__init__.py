"""The adjoint of the linearised mean-field equation: influence functions and sensitivities.

For an observable ``F(rho0) = <phi, rho(T)>`` the influence function ``Phi_0 = dF/drho0``
solves the adjoint of the linearised continuity equation backwards from ``Phi(T) = phi``
(MODEL.md, "Beyond the limit"):

    -d_s Phi = X[rho(s)] . grad Phi + G[rho(s), Phi](x),

``G`` the nonlocal term: an attention sum with Q and K exchanged whose sources are
``rho grad Phi`` (vector) and, for softmax, ``rho grad Phi . N/Z^2`` (scalar).

Discretisation (which adjoint)
    The semi-discrete adjoint of the first-order upwind finite-volume scheme on the cells
    (:mod:`.operator`), run back with the exact adjoint of SSP-RK3 (:mod:`.solver`) over the
    forward run's own steps.  For ``scheme.kind = "fv"`` this is the **discrete adjoint** of
    the forward map (for its step sizes): ``<Phi_0, nu> = d/deps <phi, rho_eps(T)>`` to
    round-off.  For ``"dg1"`` the same cell operator is linearised about the DG1 trajectory:
    a consistent (first-order) discretisation of the **continuous adjoint**, converging
    under refinement.

Memory (checkpointing)
    The forward states are kept at every ``stride``-th step, the stride doubling whenever
    more than ``stride`` states are kept (about ``2 sqrt(steps)`` states); each segment is
    recomputed from its first state during the backward sweep.

Python API (numerics; the files and the CLI are :mod:`meanfield.response`'s)::

    from meanfield.adjoint import AdjointSolver
    from meanfield.drivers.pde import PDESimulation
    solver = AdjointSolver(PDESimulation(problem, comm))   # kernel=W: (M, M) slice weights
    states = solver.forward([T1, T2])                      # time -> forward state
    phi0, d = solver.backward({T1: final1, T2: final2}, sensitivities)

``final`` arrays are ``(M, num_owned, P)``: the adjoint's values at time T per position slice
(M = 1 without a mask), owned cell and column; a column belongs to one time (zero in the
others' arrays).  ``phi0`` has the same shape; the pairing is
``(1/M) sum_k sum_c |c| phi0[k, c] nu_k[c]`` (``operator.geometry.measure``), so a final of
``phi`` in every slice is the observable of the whole token distribution, and ``phi`` in the
last slice only (times M) that of the last position.  A causal run's slices move with the
fields of ``sum_j W[k, j] mu_j``; the solver takes ``W`` from
:meth:`meanfield.causal.CausalVelocity.kernel` unless one is given (a positional decay gives
its own).  ``sensitivities`` (:class:`~meanfield.adjoint.solver.Sensitivity`) add the
derivatives of every column's value with respect to model parameters:
``sum over stages of <Phi, dL/dtheta>`` with ``dX/dtheta`` by central differences of the field.
Atoms are refused (:func:`check_supported`).
"""

from __future__ import annotations

from .operator import AdjointOperator, Linearisation
from .solver import AdjointSolver, Sensitivity, Trajectory
from .sums import AdjointSums

__all__ = ["AdjointOperator", "AdjointSolver", "AdjointSums", "Linearisation", "Sensitivity", "Trajectory",
           "check_supported"]


def check_supported(problem) -> None:
    """Refuse (``ValueError`` naming the field) what the adjoint does not linearise: atoms."""
    if problem.atoms.enabled:
        raise ValueError("atoms: the adjoint does not linearise about atoms; remove [atoms] (capture, initial)")
