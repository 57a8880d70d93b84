"""The exact discrete adjoint of the DG1 scheme's right-hand side, at one state.

For a state ``m`` of :class:`~meanfield.discretisation.dg1.DG1Scheme` (every position slice of
a causal run) the right-hand side is ``R(m) = res(m, X[m]) M^{-1}`` cell by cell, with ``X`` the
velocity at the scheme's velocity points (facet Gauss points and centroids) of the measure
whose masses ``w = S m`` sit at its source points.  Its derivative is

    dR nu = [d_m res nu + d_X res dX[S nu]] M^{-1},

and the adjoint in the DG1 pairing ``<Phi, nu> = sum_c Phi_c^T M nu_c`` (``Phi`` by its vertex
values; the pairing is ``int Phi rho``) is

    A(m) Phi = [ (d_m res)^T Phi + S^T G[a] ] M^{-1},   a = (d_X res)^T Phi,

``G`` the nonlocal term of :mod:`.sums` (the attention's linearisation transposed) evaluated
at the source points from the tangent vectors ``a`` at the velocity points (projected onto
the sphere's tangent planes, where ``X`` lives).  The transposed partial derivatives of the
upwind facet flux (``d max(u, 0) = H(u) du``), of the volume term and of the source map are
the scheme's (:meth:`~meanfield.discretisation.dg1.DG1Scheme.residual_transpose`); the
Zhang-Shu limiter's derivative is transposed too
(:meth:`~meanfield.discretisation.dg1.DG1Scheme.limiter_transpose`).  So together with
:mod:`.solver`'s transposed SSP-RK3 this is the **exact discrete adjoint** of the DG1 run:
``<Phi_0, nu> = d/deps <Phi_T, m_eps(T)>`` to round-off, for the forward run's step sizes.

Rows: the adjoint is kept per owned cell and vertex (``num_owned * nv`` rows per slice, the
state's order), at :attr:`DG1AdjointOperator.points`, the cells' vertices: a final condition
given there is the DG1 function of those values.  A final condition given per cell (one
value per cell) is the constant of each cell, the exact gradient of ``sum_c |c| rho_c phi_c``
with the cell averages; values per cell come back as each cell's vertex mean.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ..discretisation.dg1 import DG1Scheme
from ..model import VelocityField
from ..velocity import Evaluation, LayerVelocity
from .operator import AdjointOperator, Linearisation


@dataclass
class DG1Linearisation(Linearisation):
    """:class:`~.operator.Linearisation` at the DG1 scheme's points: ``normal_velocity`` and
    ``upwind`` are (M, F, nq) at the facets' Gauss points; also the velocity (M, T, d) at all
    velocity points and the slices' states (M, num_owned * nv)."""

    velocity: np.ndarray = field(default_factory=lambda: np.zeros(0))
    states: np.ndarray = field(default_factory=lambda: np.zeros(0))


class DG1AdjointOperator(AdjointOperator):
    """``A(m)`` of the module docstring for the DG1 scheme, its layers and its slices.

    Parameters as :class:`~.operator.AdjointOperator`, with ``scheme`` a
    :class:`~meanfield.discretisation.dg1.DG1Scheme`.
    """

    def __init__(self, scheme: DG1Scheme, field: LayerVelocity, kernel: np.ndarray,
                 plain: VelocityField | None = None, method: str = "direct", tol: float = 1e-10,
                 direct_sums: bool = False) -> None:
        super().__init__(scheme, field, kernel, plain, method, tol, direct_sums)
        self.dg1 = scheme
        g = self.geometry
        # the attention sums' points: the field's targets are the velocity points, the adjoint's the sources
        self.midpoints = np.ascontiguousarray(scheme.velocity_points)
        self.targets = np.ascontiguousarray(scheme.measure(np.zeros(g.num_owned * g.d))[0])
        self.nv = g.d
        self.vertices = scheme.vertex_points()
        self.mass = scheme.pairing_matrix()

    @property
    def points(self) -> np.ndarray:
        """(num_owned * nv, d) the points of the adjoint's rows: the owned cells' vertices."""
        return self.vertices

    def rows(self, values: np.ndarray) -> np.ndarray:
        """Values per owned cell (M, num_owned, P) -> the constant of each cell at its vertices;
        rows (M, num_owned * nv, P) are returned as they are."""
        if values.shape[1] == self.geometry.num_owned:
            return np.repeat(values, self.nv, axis=1)
        return values

    def cells(self, phi: np.ndarray) -> np.ndarray:
        """Rows (M, num_owned * nv, P) -> (M, num_owned, P) each cell's vertex mean."""
        return phi.reshape(phi.shape[0], -1, self.nv, phi.shape[-1]).mean(axis=2)

    def inner(self, phi: np.ndarray, slices: Sequence[np.ndarray]) -> np.ndarray:
        """(M, P) ``<Phi_k, nu_k> = sum_c Phi_kc^T M nu_kc`` (``int Phi_k nu_k``) of rows ``phi``
        (M, num_owned * nv, P) and the slices' states ``nu_k``, over all ranks (collective)."""
        from ..nonlocal_field.parallel import allreduce_sum

        local = np.array([np.einsum("cvp,vw,cw->p", p.reshape(-1, self.nv, p.shape[-1]), self.mass,
                                    s.reshape(-1, self.nv)) for p, s in zip(phi, slices)])
        return allreduce_sum(self.comm, local)

    def linearise(self, slices: Sequence[np.ndarray], known: Evaluation | None = None) -> DG1Linearisation:
        """The :class:`DG1Linearisation` at a forward state given as its slices' states (collective).
        ``known``: the forward run's evaluation of the field at that state, whose values are taken
        when it was this one (one density: the right-hand side evaluates the field at the same
        velocity points from the same sources and weights), else the field is evaluated here."""
        points = self.scheme.measure(slices[0])[0]
        weights = self.kernel @ np.array([self.scheme.measure(s)[1] for s in slices])
        model, X, inverse_Z, ratio = self.fields(points, weights, known)
        facets = [self.dg1.facet_state(s, x) for s, x in zip(slices, X)]
        return DG1Linearisation(points, weights, np.array([u for u, _ in facets]), np.array([r for _, r in facets]),
                                model, inverse_Z, ratio, velocity=X, states=np.array(slices))

    def tangents(self, lin: Linearisation, phi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The transposed derivatives at fixed velocity (M, num_owned * nv, P) of ``phi``
        (M, num_owned * nv, P), and the tangent vectors (M, T, d, P) at the velocity points."""
        assert isinstance(lin, DG1Linearisation)
        local, vectors = [], []
        for k in range(len(phi)):
            at_fixed, a = self.dg1.residual_transpose(lin.states[k], lin.velocity[k], lin.normal_velocity[k],
                                                      lin.upwind[k], phi[k], self.share)
            local.append(at_fixed)
            vectors.append(a)
        a = np.array(vectors)
        x = self.midpoints
        a -= x[None, :, :, None] * np.einsum("ktdp,td->ktp", a, x)[:, :, None, :]  # onto the tangent planes
        return np.array(local), a

    def apply(self, lin: Linearisation, phi: np.ndarray) -> np.ndarray:
        """``A(m) Phi`` for rows ``phi`` (M, num_owned * nv, P) (collective)."""
        local, a = self.tangents(lin, phi)
        if lin.model is not None:
            G = self.nonlocal_term(lin, a)  # (M, num_owned * q, P) at the source points
            local += np.array([self.dg1.source_transpose(gk) for gk in G])
        return np.array([self.dg1.mass_inverse_columns(v) for v in local])

    def limiter_transpose(self, slices: Sequence[np.ndarray], phi: np.ndarray) -> np.ndarray:
        """The limiter's transposed derivative at each slice's state before limiting, applied to ``phi``."""
        return np.array([self.dg1.limiter_transpose(s, p) for s, p in zip(slices, phi)])
