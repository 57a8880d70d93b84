"""The adjoint of the linearised equation at one state, on the cells of the mesh.

For a state ``u`` of the forward scheme (every position slice of a causal run), the
semi-discrete linearised equation of the cell averages is ``d nu / dt = J(u) nu`` with the
first-order upwind flux of :mod:`meanfield.discretisation.fv`: through facet e (cells l, r,
unit normal n_e from l to r, length |e|, midpoint m_e, ``u_e = X[u](m_e) . n_e``)

    F_e = |e| (u_e^+ rho_l - u_e^- rho_r),   dF_e = |e| (u_e^+ nu_l - u_e^- nu_r) + |e| rho_up dX[nu](m_e) . n_e.

The adjoint in the cells' inner product ``<Phi, nu> = sum_c |c| Phi_c nu_c`` is
``A(u) Phi = M^{-1} J(u)^T M Phi``, ``M = diag |c|``:

    (A Phi)_c = (1/|c|) sum_{e: c = l} |e| u_e^+ (Phi_r - Phi_l) - (1/|c|) sum_{e: c = r} |e| u_e^- (Phi_r - Phi_l)
                + G(x_c),

the upwind discretisation of ``X . grad Phi`` plus the nonlocal term ``G`` of
:mod:`.sums` with the tangent vectors ``a_e = |e| rho_up (Phi_r - Phi_l) n_e`` at the facets.
For the finite-volume scheme this is the exact transpose of its Jacobian (the discrete
adjoint of the semi-discretisation); DG1's is :mod:`.dg1`, which reuses the nonlocal term
here with its own points.

Causal runs: slice k moves with the field of the measure ``sum_j W[k, j] mu_j`` (the slices'
measures mu_j on the same points, :meth:`meanfield.discrete_pde.DiscretePDE.slice_kernel`), so the
nonlocal term of slice j collects ``sum_k W[k, j] b_k`` from the slices that attend to it:
one adjoint sum per slice.  Phi is kept per slice, scaled so that ``(1/M) sum_k <Phi_k,
nu_k>`` is the pairing (``Phi_k = phi`` at the final time for an observable of the whole
token distribution).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..discretisation.base import SpatialScheme
from ..model import AttentionModel, VelocityField
from ..nonlocal_field.base import FieldValues
from ..velocity import Evaluation, LayerVelocity
from .sums import AdjointSums


@dataclass
class Linearisation:
    """What the adjoint needs of one forward state, per slice k (arrays with a leading M axis).

    Attributes
    ----------
    points, weights
        (q, d) and (M, q): the measure each slice's field comes from (the kernel's mixture
        of the slices' measures, on the scheme's points).
    normal_velocity
        (M, F): ``u_e``, the velocity's normal component at the facet midpoints.
    upwind
        (M, F): the upwind cell average ``rho_up`` at every facet.
    model
        The attention model of the layer (``None``: no attention, no nonlocal term).
    inverse_Z, ratio
        (M, H, F) and (M, H, F, d): the attention kind's
        :meth:`~meanfield.attention.Attention.facet_terms` (softmax: ``1/Z`` and ``N/Z`` per
        head at the facets; ``None`` for a kind whose velocity is linear in N).
    """

    points: np.ndarray
    weights: np.ndarray
    normal_velocity: np.ndarray
    upwind: np.ndarray
    model: AttentionModel | None
    inverse_Z: np.ndarray | None = None
    ratio: np.ndarray | None = None


class AdjointOperator:
    """``A(u)`` of the module docstring for a spatial scheme, its layers and its slices.

    Parameters
    ----------
    scheme
        The forward spatial scheme (one slice's; FV or DG1).
    field
        A layer velocity of the run's schedule, for this operator's own use (its evaluators
        are kept apart from the forward run's); ``enter`` its layer before :meth:`linearise`.
    kernel
        (M, M) the slices' weights ``W[k, j]`` (``[[1.0]]`` without a mask).
    plain
        The velocity field when it is not the attention field (a prescribed rotation), else ``None``.
    method, tol, direct_sums
        The ``[nonlocal]`` settings of the adjoint sums.
    """

    def __init__(self, scheme: SpatialScheme, field: LayerVelocity, kernel: np.ndarray,
                 plain: VelocityField | None = None, method: str = "direct", tol: float = 1e-10,
                 direct_sums: bool = False) -> None:
        self.scheme, self.field, self.plain = scheme, field, plain
        self.kernel = np.asarray(kernel, dtype=float)
        self.comm = scheme.comm
        self.method, self.tol, self.direct_sums = method, tol, direct_sums
        g = self.geometry = scheme.geometry
        self.midpoints = np.ascontiguousarray(g.facet_midpoint)
        self.targets = np.ascontiguousarray(g.centroid[: g.num_owned])
        self.left, self.right = g.facet_cells[:, 0], g.facet_cells[:, 1]
        # a facet between an owned and a ghost cell is seen by two ranks: each counts half of it
        self.share = 0.5 * ((self.left < g.num_owned).astype(float) + (self.right < g.num_owned))
        self._sums: AdjointSums | None = None

    @property
    def slices(self) -> int:
        return self.kernel.shape[0]

    @property
    def points(self) -> np.ndarray:
        """(rows, d) the points of the adjoint's rows (the owned cells' centroids)."""
        return self.targets

    def rows(self, values: np.ndarray) -> np.ndarray:
        """(M, num_owned, P) values per owned cell -> the adjoint's rows (the same: one row per cell)."""
        return values

    def cells(self, phi: np.ndarray) -> np.ndarray:
        """The adjoint's rows -> (M, num_owned, P) values per owned cell (the same)."""
        return phi

    def inner(self, phi: np.ndarray, slices: Sequence[np.ndarray]) -> np.ndarray:
        """(M, P) ``<Phi_k, nu_k> = sum_c |c| Phi_k[c] nu_k[c]`` of rows ``phi`` (M, rows, P) and
        the slices' states ``nu_k``, over all ranks (collective)."""
        from ..nonlocal_field.parallel import allreduce_sum

        areas = self.geometry.measure[: self.geometry.num_owned]
        local = np.einsum("kcp,c,kc->kp", phi, areas, np.array([self.scheme.cell_averages(s) for s in slices]))
        return allreduce_sum(self.comm, local)

    def limiter_transpose(self, slices: Sequence[np.ndarray], phi: np.ndarray) -> np.ndarray:
        """The transposed derivative of the scheme's postprocessing at the slices' states (none: ``phi``)."""
        return phi

    def with_ghosts(self, owned: np.ndarray) -> np.ndarray:
        """(num_owned, P) values per owned cell -> (num_local, P) with the ghosts' values (a new
        array; one exchange of all P columns, :attr:`~meanfield.discretisation.base.SpatialScheme.ghosts`)."""
        return np.array(self.scheme.ghosts(owned))

    def _values(self, points: np.ndarray, weights: np.ndarray) -> FieldValues:
        assert self.field.evaluator is not None
        return self.field.evaluator.evaluate(self.midpoints, points, weights, fixed_sources=True,
                                             fixed_targets=True)

    def velocity(self, points: np.ndarray, weights: np.ndarray, field: LayerVelocity | None = None) -> np.ndarray:
        """The velocity (F, d) at the facet midpoints of the measure (points, weights) under
        ``field``'s active layer (default: this operator's)."""
        field = field or self.field
        if self.plain is not None:
            return self.plain(self.midpoints, points, weights)
        return field(self.midpoints, points, weights)

    def _known_values(self, known: Evaluation | None, points: np.ndarray, weights: np.ndarray) -> FieldValues | None:
        """The values of ``known``, an evaluation of the forward run, when it was this one (the
        same targets, sources and weights: a finite-volume stage evaluates the field of one
        density at the facet midpoints), else ``None``."""
        if known is None or self.slices != 1:
            return None
        same = all(a is b or (a.shape == b.shape and np.array_equal(a, b))
                   for a, b in ((known.targets, self.midpoints), (known.sources, points), (known.weights, weights)))
        return known.values if same else None

    def linearise(self, slices: Sequence[np.ndarray], known: Evaluation | None = None) -> Linearisation:
        """The :class:`Linearisation` at a forward state given as its slices' states (collective).
        ``known``: the forward run's evaluation of the field at that state, used when it is the
        one the linearisation needs (finite volumes; else the field is evaluated here)."""
        g = self.geometry
        points = self.scheme.measure(slices[0])[0]
        masses = np.array([self.scheme.measure(s)[1] for s in slices])
        weights = self.kernel @ masses
        averages = self.with_ghosts(np.array([self.scheme.cell_averages(s) for s in slices]).T).T
        model, X, inverse_Z, ratio = self.fields(points, weights, known)
        u = np.einsum("kij,ij->ki", X, g.facet_normal)
        upwind = np.where(u > 0, averages[:, self.left], averages[:, self.right])
        return Linearisation(points, weights, u, upwind, model, inverse_Z, ratio)

    def fields(self, points: np.ndarray, weights: np.ndarray, known: Evaluation | None = None) -> tuple[
            AttentionModel | None, np.ndarray, np.ndarray | None, np.ndarray | None]:
        """The active layer's attention model (``None``: no attention), and per slice k of the
        measures ``(points, weights[k])`` the velocity (M, F, d) at the facet points, ``1/Z``
        (M, H, F) and ``N/Z`` (M, H, F, d) (what the kind's ``facet_terms`` keeps: softmax; else ``None``)
        (collective); ``known`` as in :meth:`linearise`."""
        model = None if self.plain is not None else self.field.layer.attention
        velocities, terms = [], []
        for k in range(len(weights)):
            if model is None:
                X = self.velocity(points, weights[k])
            else:
                values = self._known_values(known, points, weights[k]) or self._values(points, weights[k])
                X = values.velocity(model, self.midpoints)
                ffn = self.field.layer.ffn
                if ffn is not None:
                    X = X + ffn.velocity(self.midpoints)
                terms.append(model.kind.facet_terms(values.N, values.Z, values.log_scale))
            velocities.append(X)
        kept = [t for t in terms if t is not None]
        return (model, np.array(velocities), np.array([t[0] for t in kept]) if kept else None,
                np.array([t[1] for t in kept]) if kept else None)

    def tangents(self, lin: Linearisation, phi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The facet differences (M, F, P) ``Phi_r - Phi_l`` and the tangent vectors
        (M, F, d, P) ``a_e = share_e |e| rho_up (Phi_r - Phi_l) n_e`` of ``phi`` (M, num_owned, P)."""
        g = self.geometry
        diff = np.array([(lambda loc: loc[self.right] - loc[self.left])(self.with_ghosts(p)) for p in phi])
        size = (self.share * g.facet_measure)[None, :, None] * lin.upwind[..., None] * diff
        return diff, size[:, :, None, :] * g.facet_normal[None, :, :, None]

    def apply(self, lin: Linearisation, phi: np.ndarray) -> np.ndarray:
        """``A(u) Phi`` for ``phi`` of shape (M, num_owned, P) (collective)."""
        g = self.geometry
        n = g.num_owned
        diff, a = self.tangents(lin, phi)
        out = np.empty_like(phi)
        for k in range(phi.shape[0]):
            u = lin.normal_velocity[k]
            from_left = g.facet_measure * np.maximum(u, 0.0)
            from_right = g.facet_measure * np.maximum(-u, 0.0)
            for p in range(phi.shape[2]):
                flow = np.bincount(self.left, from_left * diff[k, :, p], g.num_local)[:n] \
                    - np.bincount(self.right, from_right * diff[k, :, p], g.num_local)[:n]
                out[k, :, p] = flow / g.measure[:n]
        if lin.model is not None:
            out += self.nonlocal_term(lin, a)
        return out

    def nonlocal_term(self, lin: Linearisation, a: np.ndarray) -> np.ndarray:
        """``G`` (M, num_owned, P) at the cells of the tangent vectors ``a`` (M, F, d, P) (collective)."""
        model = lin.model
        assert model is not None
        if self._sums is None or self._sums.model is not model:
            self._sums = AdjointSums(model, self.comm, self.method, self.tol, self.direct_sums)
        w = np.array([h.weight for h in model.heads])
        terms = None if lin.inverse_Z is None or lin.ratio is None else (lin.inverse_Z, lin.ratio)
        vectors, scalars = model.kind.adjoint_sources(w, a, terms)  # (M, H, F, d, P) and (M, H, F, P)
        out = []
        for j in range(self.slices):
            column = self.kernel[:, j]
            if not np.any(column):
                out.append(np.zeros((self.targets.shape[0], a.shape[-1])))
                continue
            vj = np.einsum("k,khfdp->hfdp", column, vectors)
            sj = None if scalars is None else np.einsum("k,khfp->hfp", column, scalars)
            out.append(self._sums(self.targets, self.midpoints, vj, sj))
        return np.array(out)

    def pairing(self, lin: Linearisation, phi: np.ndarray, velocity_change: np.ndarray) -> np.ndarray:
        """``sum_k (1/M) sum_e a_e . dX_k(m_e)`` over all ranks: the change of ``(1/M) sum_k
        <Phi_k, L_k(u)>`` (P,) when the velocity at the facets changes by ``velocity_change`` (M, F, d)
        (collective)."""
        from ..nonlocal_field.parallel import allreduce_sum

        _, a = self.tangents(lin, phi)
        local = np.einsum("kfdp,kfd->p", a, velocity_change) / self.slices
        return allreduce_sum(self.comm, local)

