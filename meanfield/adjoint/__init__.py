"""The adjoint of the linearised mean-field equation: influence functions and sensitivities.

For an observable ``F(rho0) = <phi, rho(T)>`` the influence function ``Phi_0 = dF/drho0``
solves the adjoint of the linearised continuity equation backwards from ``Phi(T) = phi``
(MODEL.md, "Beyond the limit"):

    -d_s Phi = X[rho(s)] . grad Phi + G[rho(s), Phi](x),

``G`` the nonlocal term: an attention sum with Q and K exchanged whose sources are
``rho grad Phi`` (vector) and, for softmax, ``rho grad Phi . N/Z^2`` (scalar).

Discretisation (which adjoint)
    The **exact discrete adjoint** of the forward map (for its step sizes) for both schemes:
    ``<Phi_0, nu> = d/deps <Phi_T, rho_eps(T)>`` to round-off, run back with the adjoint of
    SSP-RK3 (:mod:`.solver`) over the forward run's own steps.  FV: the transpose of the
    upwind cell scheme's Jacobian (:mod:`.operator`).  DG1: the transpose of the DG1 scheme's
    Jacobian, with the attention's linearisation at the scheme's own quadrature points and the
    limiter's derivative (:mod:`.dg1`), so influence functions, retrieval profiles and
    gradients converge at the scheme's order (second) and a gradient is the derivative of the
    discrete loss.  (Why not a second-order discretisation of the continuous adjoint: it would
    converge at the same order, but its gradients would differ from the discrete loss's by
    the discretisation error, where a quasi-Newton fit stalls.)

Memory (kept stages, checkpointing)
    The recording run keeps every step's Runge-Kutta stages and field evaluations while they
    fit a memory budget (:func:`meanfield.memory.stage_budget`: a quarter of the available
    memory per rank, or ``MEANFIELD_ADJOINT_MEMORY`` bytes; ``AdjointSolver(...,
    stage_budget=...)``), and the forward states at every ``stride``-th step, the stride
    doubling whenever more than ``stride`` states are kept (about ``2 sqrt(steps)`` states).
    The backward sweep recomputes only the segments, from their first state, whose stages
    were not kept; ``solver.trajectory.memory()`` says what was kept.

Python API (numerics; the files and the CLI are :mod:`meanfield.response`'s)::

    from meanfield.adjoint import AdjointSolver
    from meanfield.discrete_pde import DiscretePDE
    solver = AdjointSolver(DiscretePDE(problem, comm))     # kernel=W: (M, M) slice weights
    states = solver.forward([T1, T2])                      # time -> forward state
    phi0, d = solver.backward({T1: final1, T2: final2}, sensitivities)

``final`` arrays are ``(M, rows, P)``: the adjoint's values at time T per position slice
(M = 1 without a mask), row and column, the rows at ``solver.operator.points`` (FV: the owned
cells' centroids; DG1: each owned cell's vertices); a column belongs to one time (zero in the
others' arrays).  ``phi0`` has the same shape; the pairing is ``(1/M) sum_k
operator.inner(phi0, nu)[k]`` (FV: ``sum_c |c| phi0[k, c] nu_k[c]``; DG1: ``int Phi_0 nu_k``
of the DG1 functions), so a final of ``phi`` in every slice is the observable of the whole
token distribution, and ``phi`` in the last slice only (times M) that of the last position.
A final given per cell (M, num_owned, P) is constant in each cell (DG1), and ``phi0`` comes
back per cell too (DG1: the cell means).  A causal run's slices move with the
fields of ``sum_j W[k, j] mu_j``; the solver takes ``W`` from
:meth:`meanfield.discrete_pde.DiscretePDE.slice_kernel` unless one is given (a positional decay gives
its own).  ``sensitivities`` (:class:`~meanfield.adjoint.solver.Sensitivity`) add the
derivatives of every column's value with respect to model parameters:
``sum over stages of <Phi, dL/dtheta>`` with ``dX/dtheta`` by central differences of the field.
Atoms are refused (:func:`check_supported`).
"""

from __future__ import annotations

from .dg1 import DG1AdjointOperator
from .operator import AdjointOperator, Linearisation
from .solver import AdjointSolver, Sensitivity, Trajectory
from .sums import AdjointSums

__all__ = ["AdjointOperator", "AdjointSolver", "AdjointSums", "DG1AdjointOperator", "Linearisation", "Sensitivity",
           "Trajectory", "check_supported"]


def check_supported(problem) -> None:
    """Refuse (``ValueError`` naming the field) what the adjoint does not linearise: atoms."""
    if problem.atoms.enabled:
        raise ValueError("atoms: the adjoint does not linearise about atoms; remove [atoms] (capture, initial)")
