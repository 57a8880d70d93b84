"""Second-order discontinuous Galerkin (DG1) on curved (P2) sphere cells, positivity-preserving.

Unknowns
    The density is a 2-form (S^1: 1-form), so it is pulled back to the reference simplex as
    such: on a cell ``K = x(T)`` with area element ``J = |det Dx|``, the unknown is the
    *reference mass density* ``m = rho(x(xi)) J(xi)``, linear in xi (one value per vertex;
    on flat cells this is ordinary DG1).  Then ``int_K rho f dA = int_T m (f o x) dxi``
    exactly, the mass matrix is the reference P1 mass matrix of every cell, and the cell
    mass is ``|T| * mean(m at the vertices)``.  The transport equation pulled back reads
    ``d_t m + div_xi(m U) = 0`` with the reference velocity ``U = (J^T J)^{-1} J^T X``.

Semi-discretisation
    For every test function ``lambda_i`` (barycentric coordinate) of cell K::

        d/dt int_T m lambda_i = int_T m U . grad lambda_i dxi - sum_{facets} int_e F lambda_i ds,

    ``F = |e| (u^+ rho_K - u^- rho_K')`` the upwind flux with ``u = X . nu``, where ``nu`` is
    one unit normal per facet point shared by both cells: ``nu = t x x/|x|`` for the P2 edge
    tangent t (S^1: the circle tangent at the vertex).  Mass is conserved to round-off.
    Quadrature: 2 Gauss points per edge (S^1: the vertex); the volume term uses those 6 edge
    points (weight |T|/12 each) and the centroid (|T|/2), a degree-2 rule (S^1: Simpson), so
    the velocity is only needed at the facet points and the cell centroids.

Positivity (Zhang & Shu 2010)
    For linear m the cell mass is ``|T| sum_q alpha_q m(xi_q)`` over the facet quadrature
    points (triangle: the 6 edge Gauss points, alpha = 1/6; interval: the end points,
    alpha = 1/2).  One forward-Euler step changes it by ``-dt sum_q W_q (u_q^+ rho_K(x_q) -
    u_q^- rho_K'(x_q))``, with ``rho_K = m / J`` at the point; so if m >= 0 at all these points
    (in K and its neighbours) the new cell mass is >= 0 whenever

        dt * max_K max_q  W_q u_q^+ / (|T| alpha_q J_K(x_q))  <= 1,

    the bound :meth:`DG1Scheme.rhs_and_bound` returns.  SSP-RK3 is a convex combination of
    such steps, so with ``time.cfl <= 1`` every stage has non-negative cell masses.  After every
    stage the limiter scales m towards its cell mean, ``m <- mean + theta (m - mean)`` with the
    largest theta in [0, 1] making m >= 0 at those points (mass unchanged); since m is linear
    and the points' convex hull (a hexagon) contains every other quadrature point used,
    rho >= 0 at all of them (and at the vertices on S^1, i.e. everywhere).  The DG1 CFL bound
    is about a third of the FV one (triangle: ``6 |t| u / J`` against ``|e| u / |K|``).

CFL number
    Positivity needs ``time.cfl <= 1``.  Linear (L2) stability of DG1 with SSP-RK3 is a
    separate bound: Courant number ``|u| dt / h <= 0.409`` in 1-D, while the positivity bound
    at cfl = 1 allows 0.5 on S^1, so on S^1 use ``time.cfl <= 0.8`` (the default 0.5 is
    safe; at cfl = 0.9 a rotation run stays positive but loses its accuracy).  On S^2 the
    positivity bound is the stricter one: cfl = 1 was measured stable and as accurate as 0.5.

Accuracy
    Measured orders of the cell averages: 2.1-2.5 (S^2, rotation), 3 (S^1, uniform mesh).
    As usual for DG1, the cell-average truncation error is O(h) (O(h^2) facet flux errors of
    the projection over O(h) cells) and global second order comes from the scheme's
    dissipation of that error; while the density has moved less than about one cell, the
    error grows like ``displacement * h`` instead, so convergence studies must run long enough
    (a field with |X| = 0.1 until t = 0.5 shows order 1.1-1.4 at levels 3-5; until t = 5, 1.9).

Nonlocal field
    Sources: a degree-2 rule per cell (3 interior points (2/3, 1/6, 1/6); S^1: 2 Gauss
    points), masses ``|T| w_q m(xi_q) >= 0``, summing to the cell mass; the points are one
    fixed array, so evaluators can cache them.  Targets: the facet points (each evaluated
    once, shared by both cells) and the cell centroids: 4 targets and 3 sources per cell on
    S^2 (FV: 1.5 and 1), so a field evaluation costs about 8 times FV's at the same mesh.

Why numpy and not dolfinx forms
    The scheme needs the velocity at exactly the points where the single-valued flux, the
    volume rule and the positivity proof live, point values of rho on both sides of every
    facet, and cell-wise limiting; with forms the velocity would be an interpolated Function,
    the facet normal would have to be rebuilt from ``FacetNormal`` averages, and the CFL bound
    and limiter would need the same point data in numpy anyway.  Everything here is a few
    vectorised array operations over facets and cells (dolfinx supplies partitioning,
    ghosts and the P2 geometry).

Many states at once
    The velocities are tangent, so the scheme takes them as their d - 1 components in an
    orthonormal tangent frame at each velocity point (:func:`meanfield.sphere.tangent_frames`;
    at a facet point the first vector is the normal's tangent part, scaled so that its
    component is the facet weight times the normal velocity, as the flux takes it).  The
    right-hand side is linear in m at fixed velocity and linear in the velocity at fixed m,
    apart from the upwind choice and one product per volume point; its linear maps are sparse
    matrices built once (facet densities from the cells' values, the volume term's velocity
    part from the components, the facet fluxes' part of the right-hand side), which act on k
    states with their values side by side (arrays (..., k)), a block of facet points or cells
    at a time (the temporaries stay in a core's cache).  A causal run's M slices
    (:meth:`DG1Scheme.rhs_and_bound_many`) are moved that way with one batched field
    evaluation, which gives the components without forming the velocities (``directions`` of
    :func:`meanfield.velocity.velocities`), and one ghost exchange; a single state is the case
    k = 1.  The limiter acts cell by cell, on all (cell, state) rows at once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np

from ..choices import SCHEME_DESCRIPTIONS
from ..model import VelocityField
from ..nonlocal_field.base import components
from ..sphere import cell_rule, normalize, tangent_frames
from .base import SpatialScheme, check_density_values, normalised
from .curved import area_element, curved_mesh, reference_volume, surface_gradients
from .geometry import MeshGeometry, mesh_geometry

#: About how many values (points or cell rows times states) :meth:`DG1Scheme._rhs` forms at a
#: time: a block's temporaries stay in a core's cache.
RHS_BLOCK = 1 << 16
#: Rows (cells, or cells times states) of :func:`zhang_shu_limit`'s point values formed at a
#: time (measured 5.4 -> 3.4 ms for 64 states on S^2 level 4 against all at once).
LIMITER_BLOCK = 8192
#: Relative safety margin of the limiter's scaling against rounding (see :func:`zhang_shu_limit`).
ROUNDOFF_MARGIN = 1e-12
_GAUSS2 = np.array([0.5 - 0.5 / np.sqrt(3.0), 0.5 + 0.5 / np.sqrt(3.0)])  # on [0, 1], weights 1/2


def _source_rule(nv: int) -> tuple[np.ndarray, np.ndarray]:
    """Degree-2 rule with interior points: barycentric points and weights summing to 1."""
    if nv == 3:
        a, b = 2.0 / 3.0, 1.0 / 6.0
        return np.array([[a, b, b], [b, a, b], [b, b, a]]), np.full(3, 1.0 / 3.0)
    return np.stack([1.0 - _GAUSS2, _GAUSS2], axis=1), np.full(2, 0.5)


def _facet_rule(nv: int) -> np.ndarray:
    """Positions ``s`` along a facet of its velocity points: the edge's 2 Gauss points (S^2), the vertex (S^1)."""
    return _GAUSS2 if nv == 3 else np.zeros(1)


def _positivity_points(nv: int) -> tuple[np.ndarray, float]:
    """Reference points of the Zhang-Shu decomposition and their common weight alpha."""
    if nv == 3:
        pts = [np.eye(3)[a] * (1.0 - s) + np.eye(3)[b] * s for a, b in ((0, 1), (1, 2), (2, 0)) for s in _GAUSS2]
        return np.array(pts), 1.0 / 6.0
    return np.eye(2), 0.5


def _scatter(index: np.ndarray, values: np.ndarray, size: int) -> np.ndarray:
    """``out[index[i]] += values[i]`` for rows ``values`` (k, ...) into ``size`` rows."""
    flat = values.reshape(len(index), -1)
    out = np.stack([np.bincount(index, flat[:, j], size) for j in range(flat.shape[1])], axis=1)
    return out.reshape((size,) + values.shape[1:])


def _csr(rows: np.ndarray, columns: np.ndarray, values: np.ndarray, shape: tuple[int, int]):
    """The sparse matrix with the given entries (arrays broadcast together; repeated entries summed, zeros dropped)."""
    from scipy import sparse

    rows, columns, values = np.broadcast_arrays(rows, columns, values)
    matrix = sparse.csr_matrix((values.ravel(), (rows.ravel(), columns.ravel())), shape=shape)
    matrix.eliminate_zeros()
    return matrix


def _slices(count: int, step: int) -> list[slice]:
    """``range(count)`` cut into consecutive slices of ``step`` (the last one shorter)."""
    return [slice(start, min(start + step, count)) for start in range(0, count, step)]


def zhang_shu_limit(m: np.ndarray, points: np.ndarray) -> np.ndarray:
    """Scale linear cell data towards the cell means so that it is >= 0 at the given points.

    Parameters
    ----------
    m
        (cells, nv) vertex values of linear functions on the reference simplex.
    points
        (q, nv) barycentric points where non-negativity is enforced.

    Returns
    -------
    np.ndarray
        ``mean + theta (m - mean)`` with theta in [0, 1] the largest value that makes the
        values at the points >= 0, times ``1 - ROUNDOFF_MARGIN`` so that rounding cannot
        leave a value of -1e-17; means unchanged.  A mean that is negative can only come
        from round-off under the CFL bound (Zhang-Shu), and one below ``tiny / margin``
        (about 2e-296) leaves no room for the margin in floating point: both are set to 0.
        Cells whose values at the points are all >= 0 keep theirs (``m`` itself is returned
        when that holds for all).
    """
    low = np.empty(len(m))
    for block in _slices(len(m), LIMITER_BLOCK):  # (points, cells) a block at a time, in cache
        low[block] = (points @ m[block].T).min(axis=0)  # the minimum over long contiguous rows
    limited = np.flatnonzero(~(low >= 0.0))
    if not limited.size:
        return m
    part = m[limited]
    mean = part.mean(axis=1, keepdims=True)
    mean = np.where(mean >= np.finfo(float).tiny / ROUNDOFF_MARGIN, mean, 0.0)
    drop = mean - low[limited, None]
    theta = np.clip(mean / np.where(drop > 0, drop, 1.0), 0.0, 1.0) * (1.0 - ROUNDOFF_MARGIN)
    out = m.copy()
    out[limited] = mean + theta * (part - mean)
    return out


class DG1Scheme(SpatialScheme):
    """DG1 on P2 cells with upwind flux and a Zhang-Shu limiter (see the module docstring).

    Parameters
    ----------
    msh
        Distributed P1 sphere mesh (:func:`meanfield.mesh.distribute`).
    velocity
        The velocity field of the discrete measure.
    geometry
        The P1 geometry of ``msh`` if already computed; its ``measure`` is replaced by the
        curved cell measures.
    limiter
        Apply the positivity limiter after every stage (switch off only to show it is needed).

    Notes
    -----
    The state is the owned cells' ``m`` at the reference vertices, cell-major, shape
    (num_owned * nv,); the ``*_many`` methods take k states as rows (num_owned, k, nv).
    """

    name = "dg1"
    description = SCHEME_DESCRIPTIONS[name]
    order = 2
    vertex_values = True
    options = ("limiter",)

    @staticmethod
    def velocity_components(d: int) -> int:
        return d - 1  # the velocity in a tangent frame at each point

    def __init__(self, msh, velocity: VelocityField, geometry: MeshGeometry | None = None,
                 limiter: bool = True) -> None:
        geometry = geometry or mesh_geometry(msh)
        _, cells = curved_mesh(msh)
        self.cells = cells
        nv = geometry.d
        self._nv, self._k = nv, nv - 1
        self._ref = reference_volume(self._k)
        bary, weights = cell_rule(geometry.d)
        area = cells.measure(bary, weights)
        super().__init__(msh, velocity, replace(geometry, measure=area))
        self.limiter = limiter
        g = self.geometry
        mass = self._ref * (np.eye(nv) + 1.0) / ((self._k + 1) * (self._k + 2))
        self._mass_inverse = np.linalg.inv(mass)
        self._zs_points, self._alpha = _positivity_points(nv)
        self._setup_facets()
        self._setup_volume()
        self._setup_operators()
        self._block_cache: dict[tuple[int, int], tuple[list, list]] = {}
        src_bary, src_w = _source_rule(nv)
        x, _ = cells.map(src_bary, slice(0, g.num_owned))
        self._sources = np.ascontiguousarray(normalize(x).reshape(-1, g.d))
        self._source_matrix = self._ref * src_w[:, None] * src_bary  # (q, nv): m -> source masses
        _, jac = cells.map(np.eye(nv), slice(0, g.num_owned))
        self._vertex_jacobian = area_element(jac)  # rho = m / J at the vertices

    # -- setup ---------------------------------------------------------------------------

    def _setup_facets(self) -> None:
        """Facet points, weights, normals and both cells' barycentric coordinates there.

        S^2: the 2 Gauss points of each P2 edge from vertex a to vertex b, at
        ``lambda_a = 1 - s, lambda_b = s`` in both cells (the edge is the same curve from both
        sides); S^1: the vertex.
        """
        g, nv = self.geometry, self._nv
        nf = len(g.facet_cells)
        s = _facet_rule(nv)
        rows, cols = np.arange(nf)[:, None], np.arange(len(s))[None, :]
        self._bary, self._jac_side = [], []
        for side in (0, 1):
            cell = g.facet_cells[:, side]
            local = [np.argmin(np.linalg.norm(g.vertices[cell] - g.facet_vertices[:, j : j + 1], axis=2), axis=1)
                     for j in range(nv - 1)]  # local index of each facet vertex in the cell
            bary = np.zeros((nf, len(s), nv))
            bary[rows, cols, local[0][:, None]] = 1.0 - s
            if nv == 3:
                bary[rows, cols, local[1][:, None]] = s
            x, jac = self.cells.map(bary, cell)
            self._bary.append(bary)
            self._jac_side.append(area_element(jac))
            if side == 1:
                continue
            self._facet_points = normalize(x)
            if nv == 3:
                ref = np.vstack([np.zeros(2), np.eye(2)])  # reference vertices: d xi / d s = ref[b] - ref[a]
                tangent = np.einsum("fqdk,fk->fqd", jac, ref[local[1]] - ref[local[0]])
                normal = normalize(np.cross(tangent, self._facet_points))
                self._facet_weight = 0.5 * np.linalg.norm(tangent, axis=2)
            else:
                normal = g.facet_normal[:, None, :].copy()
                self._facet_weight = np.ones((nf, 1))
            normal[np.einsum("fqd,fd->fq", normal, g.facet_normal) < 0] *= -1.0  # from left to right
            self._facet_normal = normal
        self._num_facet_targets = nf * len(s)

    def _setup_volume(self) -> None:
        """Volume rule of the owned cells: their facet points plus the centroid."""
        g, nv = self.geometry, self._nv
        nq = len(self._facet_points[0])
        sides = [(side, np.flatnonzero(g.facet_cells[:, side] < g.num_owned)) for side in (0, 1)]
        cell = np.concatenate([g.facet_cells[f, side] for side, f in sides])
        bary = np.concatenate([self._bary[side][f] for side, f in sides])
        target = np.concatenate([f[:, None] * nq + np.arange(nq) for _, f in sides])
        order = np.argsort(cell, kind="stable")
        bary = bary[order].reshape(g.num_owned, nv * nq, nv)  # nv facets per cell, nq points each
        target = target[order].reshape(g.num_owned, nv * nq)
        centroid = np.full((g.num_owned, 1, nv), 1.0 / nv)
        bary = np.concatenate([bary, centroid], axis=1)
        target = np.concatenate([target, self._num_facet_targets + np.arange(g.num_owned)[:, None]], axis=1)
        weights = np.array([1.0 / 12.0] * 6 + [0.5] if nv == 3 else [1.0 / 6.0] * 2 + [2.0 / 3.0])
        x, jac = self.cells.map(bary, slice(0, g.num_owned))
        # D[c, q, :, i] = |T| w_q * (surface gradient of lambda_i): int_T m U.grad lambda_i = sum_q m_q X_q . D_q,i
        self._volume_gradient = self._ref * weights[None, :, None, None] * surface_gradients(jac)
        self._volume_bary = bary
        self._volume_target = target
        self._volume_sums: Any = None  # built by the adjoint's first residual_transpose
        self._targets = np.concatenate([self._facet_points.reshape(-1, g.d), normalize(x[:, -1])])
        # (T, d - 1, d): tangent frames, at the facet points with the first vector along the normal
        self._frames = np.concatenate([tangent_frames(self._targets[: self._num_facet_targets],
                                                      self._facet_normal.reshape(-1, g.d)),
                                       tangent_frames(self._targets[self._num_facet_targets:])])

    def _setup_operators(self) -> None:
        """The right-hand side's linear maps, as sparse matrices that act on k states side by side.

        With ``m`` (num_local * nv, k) the local cells' values of k states and ``X`` ((d - 1) T, k)
        their velocities' components along ``_directions`` at :attr:`velocity_points` (the
        velocities are tangent: ``d - 1`` numbers a point determine them): the tangent frames
        ``_frames``, whose first vector at a facet point is the normal's tangent part, that one
        scaled by ``W nu . e_1 > 0`` so that the first component is ``W u`` (facet weight times
        normal velocity) as the flux takes it;

        - ``_upwind @ m`` (2 F nq, k): the density ``rho = m / J`` at the facet points from the
          left cell, then from the right one;
        - ``_volume @ X`` (num_owned nv (nv - 1), k): the velocity's part of the volume term,
          ``Y[(c, w, i)] = sum_q lambda_w(xi_q) X_q . (D_q M^{-1})[:, i]`` for i < nv - 1 (the
          frames' vectors dotted with the columns of D M^{-1}, divided by the directions'
          scales), so that the volume term of cell c (the inverse mass matrix applied) is
          ``sum_w m_cw Y[(c, w, i)]``; its last entry is minus the sum of the others (the
          gradients of the lambda_i sum to 0, the rows of M^{-1} to one constant);
        - ``_facet_rhs @ flux`` (num_owned * nv, k): the facet fluxes' part of the right-hand
          side, the inverse mass matrix applied.
        """
        from scipy import sparse

        g, nv, frames = self.geometry, self._nv, self._frames
        nf, nq = self._facet_normal.shape[:2]
        J = frames.shape[1]
        n, points, targets = g.num_owned, nf * nq, len(self._targets)
        point = np.arange(points).reshape(nf, nq)
        dof = np.arange(nv)
        upwind, facet_rhs = [], []
        for side, sign in ((0, -1.0), (1, 1.0)):
            cell = g.facet_cells[:, side]
            upwind.append(_csr(point[..., None], cell[:, None, None] * nv + dof,
                               self._bary[side] / self._jac_side[side][..., None], (points, g.num_local * nv)))
            owned = cell < n
            into = sign * self._bary[side][owned] @ self._mass_inverse  # (owned facets, nq, nv)
            facet_rhs.append(_csr(cell[owned, None, None] * nv + dof, point[owned, :, None], into, (n * nv, points)))
        self._upwind = sparse.vstack(upwind, format="csr")
        self._facet_rhs = facet_rhs[0] + facet_rhs[1]
        length = np.ones(frames.shape[:2])  # of the directions
        normal = self._facet_normal.reshape(points, -1)
        length[:points, 0] = self._facet_weight.ravel() * components(frames[:points, 0], normal)  # W nu . e_1
        self._directions = frames * length[..., None]
        gradient = (self._volume_gradient @ self._mass_inverse)[..., : nv - 1]  # (n, q, d, nv - 1)
        dual = frames / length[..., None]  # X = sum_j X . directions_j dual_j
        gradient = np.einsum("cqjd,cqdi->cqji", dual[self._volume_target], gradient)  # (n, q, J, nv - 1)
        row = (np.arange(n)[:, None, None, None, None] * nv + dof[:, None, None]) * (nv - 1) + np.arange(nv - 1)
        self._volume = _csr(row, self._volume_target[:, :, None, None, None] + np.arange(J)[:, None] * targets,
                            self._volume_bary[:, :, :, None, None] * gradient[:, :, None],  # (n, q, w, j, i)
                            (n * nv * (nv - 1), J * targets))
        scale = self._ref * self._alpha
        self._rate_factors = [np.where(g.facet_cells[:, side, None] < n, 1.0 / (scale * self._jac_side[side]), 0.0)
                              .ravel() for side in (0, 1)]

    # -- the scheme ----------------------------------------------------------------------

    def _with_ghosts(self, owned: np.ndarray) -> np.ndarray:
        """Owned cells' values (num_owned, nv, k) -> all local cells' (num_local * nv, k)
        (:attr:`ghosts`: not to be modified, a view of the exchange or of ``owned``)."""
        return self.ghosts(owned).reshape(-1, owned.shape[2])

    @staticmethod
    def field_points(cells: int, nv: int) -> tuple[int, int]:
        facets = cells * nv // 2  # each facet between two cells
        return facets * len(_facet_rule(nv)) + cells, cells * len(_source_rule(nv)[1])  # + centroids

    def initial_state(self, density: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
        g = self.geometry
        bary, weights = cell_rule(g.d)
        x, jac = self.cells.map(bary, slice(0, g.num_owned))
        points = normalize(x)
        values = np.asarray(density(points.reshape(-1, g.d)), dtype=float).reshape(points.shape[:2])
        check_density_values(self.comm, values, points)
        values = normalised(self.comm, values, 0.0 * values + 1.0)  # unit scale: no overflow below
        load = self._ref * np.einsum("cq,q,qv->cv", values * area_element(jac), weights, bary)
        m = normalised(self.comm, load @ self._mass_inverse, self._ref / self._nv)
        return self.postprocess(m.ravel())

    def facet_velocity(self, X: np.ndarray) -> np.ndarray:
        """Normal velocity (facets, points) from the velocity at the targets."""
        Xf = X[: self._num_facet_targets].reshape(self._facet_normal.shape)
        return np.einsum("fqd,fqd->fq", Xf, self._facet_normal)

    def rhs_and_bound(self, state: np.ndarray) -> tuple[np.ndarray, float]:
        X = self.velocity(self._targets, self._sources, self.measure(state)[1])
        rhs, rate = self._rhs(self._with_ghosts(state.reshape(-1, self._nv, 1)), components(X, self._directions)[None])
        return rhs.ravel(), rate

    def measure_many(self, rows: np.ndarray) -> np.ndarray:
        return np.matmul(self._source_matrix, rows.transpose(0, 2, 1)).reshape(-1, rows.shape[1])

    def rhs_and_bound_many(self, rows: np.ndarray) -> tuple[np.ndarray, float]:
        """:meth:`rhs_and_bound` of k states at once (``rows`` (num_owned, k, nv)): the velocities
        of their k measures in the tangent frames from one batched evaluation
        (:func:`meanfield.velocity.velocities`) and the right-hand sides of all of them in one
        pass, their values side by side."""
        from ..velocity import velocities

        X = velocities(self.velocity, self._targets, self._sources, self.measure_many(rows), self._directions)
        return self._rhs(self._with_ghosts(rows.transpose(0, 2, 1)), X)

    def _rhs(self, m: np.ndarray, X: np.ndarray) -> tuple[np.ndarray, float]:
        """The right-hand sides (num_owned, k, nv) of k states given by the local cells' values m
        (num_local * nv, k) and their velocities' components X (k, T, d - 1) in the tangent
        frames at :attr:`velocity_points`, and the largest forward-Euler bound (collective).

        The fluxes are formed a block of facet points at a time, the right-hand sides a block of
        cells at a time (:meth:`_blocks`), so that the temporaries stay in a core's cache."""
        from mpi4py import MPI

        n, nv, k = self.geometry.num_owned, self._nv, m.shape[1]
        point_blocks, cell_blocks = self._blocks(k)
        X = np.ascontiguousarray(X.transpose(2, 1, 0))  # (d - 1, T, k): the states side by side
        flux = np.empty((self._num_facet_targets, k))  # the upwind fluxes from left to right
        rates = [0.0]
        for points, upwind, left, right in point_blocks:
            uw = X[0, points]  # facet weight times normal velocity
            rho = upwind @ m  # the density from the left cell, then from the right one
            f = flux[points]
            np.copyto(f, rho[: len(f)])
            np.copyto(f, rho[len(f):], where=uw <= 0.0)
            f *= uw
            # the largest W u^+ / (|T| alpha J) at the points of owned cells (the factors are 0 elsewhere)
            rates += [(left * uw).max(initial=0.0), -(right * uw).min(initial=0.0)]
        rhs = np.empty((n, k, nv))
        values, velocities = m[: n * nv].reshape(n, nv, 1, k), X.reshape(-1, k)
        for cells, facet_rhs, volume_rhs in cell_blocks:
            out = (facet_rhs @ flux).reshape(-1, nv, k)
            volume = (volume_rhs @ velocities).reshape(-1, nv, nv - 1, k)
            volume *= values[cells]
            volume = volume.sum(axis=1)  # (cells, nv - 1, k)
            out[:, : nv - 1] += volume
            out[:, nv - 1] -= volume.sum(axis=1)
            rhs[cells] = out.transpose(0, 2, 1)
        return rhs, self.comm.allreduce(float(np.max(rates)), op=MPI.MAX)  # nan stays nan

    def _blocks(self, k: int) -> tuple[list, list]:
        """The right-hand side's operators cut into blocks for k states (:data:`RHS_BLOCK` values
        a block), kept per block size: per block of facet points (slice, its rows of
        ``_upwind`` from both sides, rate factors of both sides), per block of
        owned cells (slice, its rows of ``_facet_rhs`` and of ``_volume``)."""
        from scipy import sparse

        nv, points, n = self._nv, self._num_facet_targets, self.geometry.num_owned
        size = (max(RHS_BLOCK // k, 1), max(RHS_BLOCK // (k * nv * (nv - 1)), 1))
        if size not in self._block_cache:
            point_blocks = []
            for block in _slices(points, size[0]):
                right = slice(points + block.start, points + block.stop)
                from_both = sparse.vstack([self._upwind[block], self._upwind[right]], format="csr")
                point_blocks.append((block, from_both, self._rate_factors[0][block, None],
                                     self._rate_factors[1][block, None]))
            rows = nv * (nv - 1)
            cell_blocks = [(block, self._facet_rhs[block.start * nv: block.stop * nv],
                            self._volume[block.start * rows: block.stop * rows]) for block in _slices(n, size[1])]
            self._block_cache = {size: (point_blocks, cell_blocks)}  # the last size only (k = M, or one state)
        return self._block_cache[size]

    def postprocess(self, state: np.ndarray) -> np.ndarray:
        if not self.limiter:
            return state
        return zhang_shu_limit(state.reshape(-1, self._nv), self._zs_points).ravel()

    def postprocess_many(self, rows: np.ndarray) -> np.ndarray:
        if not self.limiter:
            return rows
        return zhang_shu_limit(rows.reshape(-1, self._nv), self._zs_points).reshape(rows.shape)

    def cell_averages(self, state: np.ndarray) -> np.ndarray:
        return self._ref * state.reshape(-1, self._nv).mean(axis=1) / self.geometry.measure[: self.geometry.num_owned]

    def point_values(self, state: np.ndarray) -> np.ndarray:
        """The density at the positivity points of the owned cells, (num_owned, q)."""
        m = state.reshape(-1, self._nv)
        bary = self._zs_points
        _, jac = self.cells.map(bary, slice(0, self.geometry.num_owned))
        return (m @ bary.T) / area_element(jac)

    def measure(self, state: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return self._sources, (state.reshape(-1, self._nv) @ self._source_matrix.T).ravel()

    def vertex_density(self, state: np.ndarray) -> np.ndarray:
        """The density ``m / J`` at each owned cell's vertices, (num_owned, nv)."""
        return state.reshape(-1, self._nv) / self._vertex_jacobian

    def vertex_jacobian(self) -> np.ndarray:
        return self._vertex_jacobian

    # -- linearisation (the exact discrete adjoint, :mod:`meanfield.adjoint.dg1`) --------------

    @property
    def velocity_points(self) -> np.ndarray:
        """(T, d) the points where a right-hand side needs the velocity: the facet points
        (facet-major), then the owned cells' centroids."""
        return self._targets

    def vertex_points(self) -> np.ndarray:
        """(num_owned * nv, d) the owned cells' vertices on the sphere, in the state's order
        (a function given by its values there is the DG1 function of those vertex values)."""
        x, _ = self.cells.map(np.eye(self._nv), slice(0, self.geometry.num_owned))
        return normalize(x).reshape(-1, self.geometry.d)

    def pairing_matrix(self) -> np.ndarray:
        """(nv, nv) the reference mass matrix: ``int_K Phi rho dA = Phi_c^T mass m_c`` for a DG1
        function Phi (vertex values Phi_c) and the state m_c of cell c."""
        return np.linalg.inv(self._mass_inverse)

    def _local_columns(self, values: np.ndarray) -> np.ndarray:
        """(num_owned * nv, P) per owned dof -> (num_local, nv, P), the ghost cells' values filled in."""
        shape = (-1, self._nv, values.shape[1])
        return self._with_ghosts(values.reshape(shape)).reshape(shape).copy()  # (the exchange's buffer is reused)

    def facet_state(self, state: np.ndarray, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(F, nq) the normal velocity ``u`` at the facet points of the velocity X (T, d) at
        :attr:`velocity_points`, and the upwind density there (:meth:`rhs_and_bound`'s)."""
        m = self._with_ghosts(state.reshape(-1, self._nv, 1))
        u = self.facet_velocity(X)
        left, right = (self._upwind @ m).reshape((2,) + u.shape)
        return u, np.where(u > 0, left, right)

    def residual_transpose(self, state: np.ndarray, X: np.ndarray, u: np.ndarray, upwind: np.ndarray,
                           phi: np.ndarray, share: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The transposed derivative of the right-hand side, applied to ``phi``.

        With ``R(m) = res(m, X) M^{-1}`` (:meth:`rhs_and_bound`, X the velocity at
        :attr:`velocity_points`), the adjoint of the linearised right-hand side in the pairing
        ``<Phi, nu> = sum_c Phi_c^T M nu_c`` is ``(d res/dm)^T Phi M^{-1}`` plus the velocity's
        part; this returns the two transposed partial derivatives.

        Parameters
        ----------
        state
            The owned state m about which to linearise.
        X
            (T, d) the velocity at :attr:`velocity_points` of that state.
        u, upwind
            (F, nq) :meth:`facet_state` of the state and X.
        phi
            (num_owned * nv, P) the adjoint's vertex values.
        share
            (F,) the part of each facet this rank counts in the velocity's term (1/2 for a
            facet seen by two ranks).

        Returns
        -------
        at_fixed_velocity
            (num_owned * nv, P): ``(d res/dm)^T Phi`` at fixed X (not yet times ``M^{-1}``).
        tangents
            (T, d, P): ``(d res/dX)^T Phi``, the vectors that the velocity's derivative is paired
            with (not projected onto the sphere's tangent planes).
        """
        g, nv, n = self.geometry, self._nv, self.geometry.num_owned
        P = phi.shape[1]
        p = self._local_columns(phi)  # (num_local, nv, P)
        left, right = g.facet_cells[:, 0], g.facet_cells[:, 1]
        bary_l, bary_r = self._bary
        # (F, nq, P): Phi_r - Phi_l at the facet points (einsum: numpy's matmul is slow on stacks of tiny matrices)
        jump = np.einsum("fqv,fvp->fqp", bary_r, p[right]) - np.einsum("fqv,fvp->fqp", bary_l, p[left])
        out_l = self._facet_weight * np.maximum(u, 0.0) / self._jac_side[0]
        out_r = self._facet_weight * np.maximum(-u, 0.0) / self._jac_side[1]
        to_left = np.einsum("fqv,fqp->fvp", bary_l, out_l[..., None] * jump)  # (F, nv, P)
        to_right = np.einsum("fqv,fqp->fvp", bary_r, out_r[..., None] * jump)
        local = (_scatter(left, to_left, g.num_local) - _scatter(right, to_right, g.num_local))[:n]
        m_q = np.einsum("cqv,cv->cq", self._volume_bary, state.reshape(n, nv))
        # the volume term's transposes in m and in X, from grad_phi[c, q] = sum_i Phi_ci D_qi (d, P)
        grad_phi = np.einsum("cqdv,cvp->cqdp", self._volume_gradient, p[:n])  # (n, q, d, P)
        h = np.einsum("cqd,cqdp->cqp", X[self._volume_target], grad_phi)  # X_q . grad_phi
        local += np.einsum("cqv,cqp->cvp", self._volume_bary, h)
        tangents = (self._volume_scatter() @ (m_q[..., None, None] * grad_phi).reshape(-1, g.d * P)).reshape(-1, g.d, P)
        facet = (share[:, None] * self._facet_weight * upwind)[..., None] * jump  # (F, nq, P)
        tangents[: self._num_facet_targets] += (facet[:, :, None, :]
                                               * self._facet_normal[..., None]).reshape(-1, g.d, P)
        return local.reshape(n * nv, P), tangents

    def _volume_scatter(self):
        """The sparse (T, num_owned * q) sum of the volume points' values into their velocity points."""
        if self._volume_sums is None:
            from scipy import sparse

            target = self._volume_target.ravel()
            self._volume_sums = sparse.csr_matrix((np.ones(target.size), (target, np.arange(target.size))),
                                                  shape=(len(self._targets), target.size))
        return self._volume_sums

    def source_transpose(self, values: np.ndarray) -> np.ndarray:
        """(num_owned * q, P) values at the field's source points -> (num_owned * nv, P): the
        transpose of the map from the state to the source masses (:meth:`measure`)."""
        n = self.geometry.num_owned
        return np.einsum("qv,cqp->cvp", self._source_matrix, values.reshape(n, -1, values.shape[1])).reshape(
            n * self._nv, -1)

    def mass_inverse_columns(self, values: np.ndarray) -> np.ndarray:
        """(num_owned * nv, P) -> the same times the inverse reference mass matrix, cell by cell."""
        n = self.geometry.num_owned
        return np.einsum("cvp,vw->cwp", values.reshape(n, self._nv, -1), self._mass_inverse).reshape(n * self._nv, -1)

    def limiter_transpose(self, state: np.ndarray, phi: np.ndarray) -> np.ndarray:
        """The adjoint of the derivative of :meth:`postprocess` at ``state`` (before limiting)
        in the pairing of :meth:`residual_transpose` (``M^{-1} J^T M`` cell by cell), applied to
        ``phi`` (num_owned * nv, P).

        Where the limiter leaves a cell alone (its values at the positivity points >= 0) this
        is the identity; where it scales, ``m -> mean + theta (m - mean)`` with
        ``theta = (1 - margin) mean / (mean - low)`` (clipped to [0, 1]), ``low`` the smallest
        value at the points, whose derivative is taken at the minimising point.
        """
        if not self.limiter:
            return phi
        nv = self._nv
        m = state.reshape(-1, nv)
        values = m @ self._zs_points.T
        low = values.min(axis=1)
        limited = low < 0.0
        if not np.any(limited):
            return phi
        p = np.einsum("vw,cwp->cvp", self.pairing_matrix(), phi.reshape(m.shape[0], nv, -1))
        mean = m.mean(axis=1)
        usable = mean >= np.finfo(float).tiny / ROUNDOFF_MARGIN
        drop = mean - low
        raw = np.divide(mean, drop, out=np.zeros_like(mean), where=drop > 0)
        theta = np.where(usable, np.clip(raw, 0.0, 1.0), 0.0) * (1.0 - ROUNDOFF_MARGIN)
        inside = usable & (raw > 0.0) & (raw < 1.0) & (drop > 0)
        point = self._zs_points[values.argmin(axis=1)]  # (cells, nv): d low / d m
        safe = np.where(drop > 0, drop, 1.0)
        dtheta = np.where(inside[:, None], (1.0 - ROUNDOFF_MARGIN)
                          * ((1.0 / nv) / safe[:, None] - (mean / safe ** 2)[:, None] * (1.0 / nv - point)), 0.0)
        mean_part = np.where(usable, 1.0 - theta, 0.0)[:, None] / nv * p.sum(axis=1)  # (cells, P)
        spread = np.einsum("cv,cvp->cp", m - mean[:, None], p)
        scaled = mean_part[:, None, :] + theta[:, None, None] * p + dtheta[:, :, None] * spread[:, None, :]
        return np.where(limited[:, None, None], np.einsum("vw,cwp->cvp", self._mass_inverse, scaled),
                        phi.reshape(p.shape)).reshape(phi.shape)
