"""Clusters of tokens: a kernel density estimate analysed like a PDE density.

The density of weighted tokens ``sum_j w_j delta_{y_j}`` is estimated with the von
Mises-Fisher kernel of bandwidth h (concentration ``kappa = 1/h^2``, so h is about the
kernel's standard deviation in radians)::

    f(x) = sum_j w_j C_d(kappa) exp(kappa (<x, y_j> - 1)),   C_d(kappa) = kappa^nu / ((2 pi)^{d/2} I_nu(kappa) e^kappa),

nu = d/2 - 1.  The watershed (:mod:`.basins`) sees f at the analysis mesh's cell centroids (the
kernel cut where it falls below ``exp(-CUTOFF)``; binning the tokens into cells first would be
cheaper but adds the counting noise of a few tokens per cell, enough to make spurious peaks).
Peaks are then maximised on the exact estimate f (Newton's method on the sphere from the top
cell's centroid, with the tokens within the kernel's reach); masses and widths sum the tokens
of each region (the same regions of cells as for a PDE density; on S^1 with the ends moved to
the minima of f, as for PDE data).

Default bandwidth: the mesh's cell size.  The estimate's bias moves a peak by about
``(h^2 / 2) |rho'''| / |rho''|`` (zero for a symmetric peak) and lowers its height by about
``(h / width)^2 / 2``; its noise is that of the token sample: small for the deterministic
samplers (``quantile``, ``fibonacci``), large for random ones at small n, where a larger
bandwidth or prominence is needed.
"""

from __future__ import annotations

import numpy as np
from scipy import special
from scipy.spatial import cKDTree

from .cells import AnalysisMesh
from .coords import exp_map, geodesic, log_map, tangent_basis
from .fields import Field, region_integrals, widths

#: The kernel is cut where it falls below ``exp(-CUTOFF)`` of its peak.
CUTOFF = 30.0
NEWTON_STEPS = 50
#: Newton has converged when a step is shorter than this (radians): far above the round-off of
#: the step (which stalls at 1e-13 with some BLAS kernels), far below any use of the position
#: (Newton converges quadratically: the error after such a step is ~1e-20).
NEWTON_TOL = 1e-10
#: Kernel pairs (centroid, token) per block when evaluating f at the centroids (bounds their memory).
PAIRS = 4_000_000


def kernel_constant(d: int, kappa: float) -> float:
    """``C_d(kappa)`` of the module docstring (overflow-free)."""
    nu = d / 2.0 - 1.0
    return float(np.exp(nu * np.log(kappa) - (d / 2.0) * np.log(2.0 * np.pi) - np.log(special.ive(nu, kappa))))


class TokenField(Field):
    """Kernel density estimate of weighted tokens on an analysis mesh (module docstring).

    Parameters
    ----------
    mesh
        The analysis mesh (same sphere as the tokens).
    points
        (n, d) token positions on the sphere.
    weights
        (n,) token weights (default 1/n).
    bandwidth
        h in radians (default: ``mesh.cell_size``).
    """

    source = "tokens"

    def __init__(self, mesh: AnalysisMesh, points: np.ndarray, weights: np.ndarray | None = None,
                 bandwidth: float | None = None) -> None:
        self.mesh = mesh
        self.points = np.asarray(points, float)
        n = len(self.points)
        self.weights = np.full(n, 1.0 / n) if weights is None else np.asarray(weights, float)
        self.bandwidth = float(bandwidth if bandwidth is not None else mesh.cell_size)
        self.kappa = 1.0 / self.bandwidth**2
        self.constant = kernel_constant(mesh.d, self.kappa)
        self.reach = float(np.sqrt(2.0 * CUTOFF / self.kappa))  # chord distance of the cutoff
        self.cells = mesh.locator.locate(self.points)
        self._tree = cKDTree(self.points)
        self.values = self._at_centroids()

    def _at_centroids(self) -> np.ndarray:
        """f at every cell centroid, summing the kernel over the tokens within reach, block by block."""
        centroids = cKDTree(self.mesh.centroids)
        values = np.zeros(self.mesh.num_cells)
        # fraction of the sphere within chord distance r: r^2/4 on S^2, at most r/2 on S^1
        reached = self.mesh.num_cells * min(1.0, (self.reach / 2.0) ** (self.mesh.d - 1))
        step = max(1, int(PAIRS / max(reached, 1.0)))
        for lo in range(0, len(self.points), step):
            block = cKDTree(self.points[lo : lo + step])
            pairs = centroids.sparse_distance_matrix(block, self.reach, output_type="ndarray")
            kernel = np.exp(-0.5 * self.kappa * pairs["v"] ** 2)  # <x, y> - 1 = -|x - y|^2 / 2
            values += np.bincount(pairs["i"], kernel * self.weights[lo + pairs["j"]], self.mesh.num_cells)
        return self.constant * values

    def density(self, x: np.ndarray) -> float:
        """The estimate f at one point x (d,)."""
        near = self._tree.query_ball_point(x, self.reach)
        y = self.points[near]
        return float(self.constant * self.weights[near] @ np.exp(self.kappa * (y @ x - 1.0)))

    def _newton(self, x: np.ndarray, maximum: bool) -> tuple[np.ndarray, bool]:
        """Newton's method on the sphere for a maximum (or minimum) of f from x, steps <= h.

        Towards a maximum, points where f is not yet concave take a mean-shift step instead;
        a minimum is given up (``found = False``) where f is not convex.
        """
        near = self._tree.query_ball_point(x, self.reach + 2.0 * self.mesh.cell_size)
        y, w = self.points[near], self.weights[near]
        sign = 1.0 if maximum else -1.0
        for _ in range(NEWTON_STEPS):
            e = w * np.exp(self.kappa * (y @ x - 1.0))
            g = self.kappa * (e @ y)  # Euclidean gradient of sum e_j
            basis = tangent_basis(x)
            grad = basis.T @ g
            hess = self.kappa**2 * (basis.T @ (y.T * e) @ y @ basis) - (x @ g) * np.eye(len(grad))
            if np.any(sign * np.linalg.eigvalsh(hess) >= 0):
                if not maximum:
                    return x, False
                x = g / np.linalg.norm(g)
                continue
            step = -np.linalg.solve(hess, grad)
            length = np.linalg.norm(step)
            if length > self.bandwidth:  # trust region: one bandwidth
                step *= self.bandwidth / length
            x = exp_map(x, step)[0]
            if np.linalg.norm(step) < NEWTON_TOL:
                return x, True
        return x, maximum

    def peak(self, cell: int) -> tuple[np.ndarray, float]:
        """Maximise f from the cell's centroid (:meth:`_newton`)."""
        x, _ = self._newton(self.mesh.centroids[cell].copy(), maximum=True)
        return x, self.density(x)

    def moments(self, labels: np.ndarray, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Token masses and widths per region; on S^1 region ends move to the minimum of f nearby.

        At each place two regions meet (a vertex shared by their cells), the tokens of those
        two cells are assigned by the side of the minimum of f (Newton from the vertex) they
        lie on; where no minimum is found the vertex stays the end.
        """
        token_labels = labels[self.cells]
        if self.mesh.dimension == 1:  # regions meet at points
            for c, n, v in self.mesh.region_ends(labels):
                vertex = self.mesh.vertices[v]
                end, found = self._newton(vertex.copy(), maximum=False)
                if not found or geodesic(end, vertex) > self.mesh.cell_size:
                    continue
                mine = np.flatnonzero((self.cells == c) | (self.cells == n))
                side = log_map(end, self.points[mine])[:, 0] * log_map(end, self.mesh.centroids[n][None])[0, 0]
                token_labels[mine] = np.where(side > 0, labels[n], labels[c])
        mass, second = region_integrals(self.points, self.weights, token_labels, positions)
        return mass, widths(mass, second)
